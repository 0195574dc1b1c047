/* Q4_K weight blocks (256 elements: f16 d and dmin, eight 6-bit (scale, min) pairs, 128
 * bytes of nibbles; value = d * scale_s * q - dmin * min_s) times Q8_K activation blocks:
 * lp_qd_dot_k45 without fifth bits (qdot.h). */
#include "qdot.h"

float lp_k_dot_q4_k(int64_t nb, const uint8_t *w, const lp_q8k *a)
{
    return lp_qd_dot_k45(nb, w, a, false);
}
