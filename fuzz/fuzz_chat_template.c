/* libFuzzer target: chat templates (lp_chat_template_parse + render) over arbitrary bytes.
 * The input is a template, optionally followed by a NUL and a messages JSON; without one a
 * fixed two-turn conversation with a tool call is rendered, with and without the
 * generation prompt. Any failure must leave a one-line message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/text.h"

static const char default_msgs[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \" sys \"}, {\"role\": \"user\", \"content\": \"hi\"},"
    " {\"role\": \"assistant\", \"content\": \"yo\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5]}}}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}";

static void check_msg(void)
{
    const char *m = lp_err_msg();
    if (!m[0] || strchr(m, '\n')) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *msgs = NULL;
    if (nul) {
        size_t mlen = size - tlen - 1;
        msgs = malloc(mlen + 1);
        if (!msgs) return 0;
        memcpy(msgs, nul + 1, mlen);
        msgs[mlen] = 0;
    }
    lp_chat_template *t;
    if (lp_chat_template_parse(src, tlen, "fuzz.jinja", &t) != LP_OK) {
        check_msg();
        free(msgs);
        return 0;
    }
    for (int gen = 0; gen < 2; gen++) {
        lp_chat_vars v = {.messages_json = msgs ? msgs : default_msgs, .bos_token = "<s>", .eos_token = "</s>",
                          .extra_json = "{\"date_string\": \"1 Jan 2025\"}", .add_generation_prompt = gen};
        char *out = NULL;
        size_t n = 0;
        if (lp_chat_template_render(t, &v, &out, &n) == LP_OK) {
            if (!out || out[n] != 0) abort();
            free(out);
        } else {
            check_msg();
            if (out) abort();
        }
    }
    lp_chat_template_free(t);
    free(msgs);
    return 0;
}
