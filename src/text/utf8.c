/* UTF-8 decoding and repair, the character classes BERT's normalizer and pre-tokenizer
 * use (through utf8proc's Unicode tables), and GPT-2's byte <-> printable-char alphabet. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "internal.h"
#include "bert_unicode_tab.h"


/* BERT's class of a code point, pinned to what HF computes (see the generator). */
static int bert_class(int32_t c)
{
    size_t lo = 0, hi = sizeof lp_bert_class_tab / sizeof lp_bert_class_tab[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < lp_bert_class_tab[mid][0]) hi = mid;
        else if (c > lp_bert_class_tab[mid][1]) lo = mid + 1;
        else return lp_bert_class_tab[mid][2];
    }
    return 0;
}

int32_t lp_utf8_next(const uint8_t *s, size_t n, int *len)
{
    uint8_t c = s[0];
    if (c < 0x80 || n < 2) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((c & 0x1F) << 6) | (s[1] & 0x3F); }
    if (c < 0xF0 || n < 4) { *len = 3; return ((c & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F); }
    *len = 4;
    return ((c & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

int lp_utf8_put(int32_t cp, char *out)
{
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the well-formed sequence at s, or -k when invalid, k being the length of the
 * maximal subpart to replace by one U+FFFD (Unicode 15, section 3.9, table 3-7). */
static int seq_len(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if (c == 0xED) { need = 2; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) need = 2;
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else return -1;
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) return -i;
        uint8_t d = s[i];
        if (i == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return -i;
    }
    return need + 1;
}

size_t lp_utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        int k = seq_len(s + i, n - i);
        if (k < 0) return i;
        i += (size_t)k;
    }
    return n;
}

char *lp_utf8_sanitize(const char *src, size_t len, size_t *out_len)
{
    const uint8_t *s = (const uint8_t *)src;
    /* worst case: every byte becomes 3 bytes of U+FFFD */
    if (len > (SIZE_MAX - 1) / 3) return NULL;
    char *out = lp_malloc(len * 3 + 1);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < len) {
        int k = seq_len(s + i, len - i);
        if (k > 0) {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)-k;
        }
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

int lp_is_ws(int32_t c)
{
    /* Unicode White_Space, as Rust's char::is_whitespace (used by HF's BERT parts). */
    if (c < 0x80) return c == ' ' || (c >= 9 && c <= 13);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int lp_is_control(int32_t c)
{
    /* HF removes Cc, Cf and Co (as its tables know them), not unassigned code points */
    if (c < 0x80) return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F;
    return bert_class(c) == LP_BERT_CONTROL;
}

int lp_is_punct(int32_t c)
{
    if (c < 0x80)
        return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    return bert_class(c) == LP_BERT_PUNCT;
}

int lp_is_cjk(int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

int lp_is_numeric(int32_t c)
{
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

int lp_is_mn(int32_t c) { return c >= 0x300 && bert_class(c) == LP_BERT_MN; }

/* GPT-2's alphabet: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order, so every byte has a visible, non-space stand-in. */
int32_t lp_byte_to_cp[256] = {
#define R(b) ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
    0};

static int32_t cp_to_byte_tab[324];

__attribute__((constructor)) static void init_byte_map(void)
{
    int n = 0;
    for (int b = 0; b < 256; b++) lp_byte_to_cp[b] = R(b) ? b : 256 + n++;
    for (int i = 0; i < 324; i++) cp_to_byte_tab[i] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte_tab[lp_byte_to_cp[b]] = b;
}
#undef R

int lp_cp_to_byte(int32_t cp) { return cp >= 0 && cp < 324 ? cp_to_byte_tab[cp] : -1; }
