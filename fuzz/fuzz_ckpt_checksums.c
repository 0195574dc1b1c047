/* libFuzzer target: a checkpoint's checksums.json (what `--resume` and `loupe checkpoint
 * verify` trust to tell a damaged checkpoint from a good one). The bytes are checksums.json
 * beside fixed checkpoint files (a one-tensor state.safetensors, trainer_state.json and the
 * two CSVs, written once); lp_checkpoint_verify must end in LP_OK or an error naming a file,
 * never a crash, leak or sanitizer report. The seed holds the files' true crc32 values, so
 * the verifying path is reached as well as the refusing ones. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loupe/train.h"

static char dir[64], path[96];

static void put(const char *name, const void *data, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *fp = fopen(p, "wb");
    if (!fp || fwrite(data, 1, n, fp) != n || fclose(fp) != 0)
        abort();
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/lp_fuzz_ckpt_%ld", (long)getpid());
    if (lp_mkdir_p(dir) != LP_OK)
        abort();
    /* safetensors: 8-byte header length, the header (padded to 8), two f32 values */
    static const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}    ";
    unsigned char st[8 + sizeof hdr - 1 + 8];
    uint64_t hn = sizeof hdr - 1;
    memcpy(st, &hn, 8);
    memcpy(st + 8, hdr, hn);
    const float w[2] = {1.0f, 2.0f};
    memcpy(st + 8 + hn, w, 8);
    put("state.safetensors", st, sizeof st);
    put("trainer_state.json", "{}\n", 3);
    put("steps.csv", "step\n", 5);
    put("epoch_results.csv", "epoch\n", 6);
    snprintf(path, sizeof path, "%s/checksums.json", dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0])
        setup();
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0)
        abort();
    bool has = false;
    lp_status st = lp_checkpoint_verify(dir, &has);
    if (st == LP_OK && !has)
        abort(); /* checksums.json is there: "no checksums" would be a lie */
    if (st != LP_OK && !lp_err_msg()[0])
        abort();
    return 0;
}
