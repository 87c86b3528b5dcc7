/* An IPv6 address's text as Python's ipaddress.IPv6Address(p).compressed writes it, in brackets:
 * shared by dump's JSON lines (rmqstore_cli/_cjson.c) and export's host column (_carrow.c). */
#ifndef RMQSTORE_V6TEXT_H
#define RMQSTORE_V6TEXT_H
#include <stdint.h>

/* "[v6]" as ipaddress.IPv6Address(p).compressed writes it (RFC 5952): hextets in lower-case
 * hex without leading zeros, the first longest run of two or more zero hextets as "::". */
static inline int64_t put_v6(uint8_t *out, int64_t o, const uint8_t *p)
{
    int h[8], best = -1, best_len = 1, run = 0;
    for (int k = 0; k < 8; k++) {
        h[k] = p[2 * k] << 8 | p[2 * k + 1];
        run = h[k] ? 0 : run + 1;
        if (run > best_len)
            best_len = run, best = k - run + 1;
    }
    out[o++] = '[';
    for (int k = 0; k < 8; k++) {
        if (k == best) {
            out[o++] = ':';
            if (k == 0)
                out[o++] = ':';
            k += best_len - 1;
            continue;
        }
        int shift = 12;
        while (shift > 0 && !(h[k] >> shift))
            shift -= 4;
        for (; shift >= 0; shift -= 4)
            out[o++] = (uint8_t)"0123456789abcdef"[(h[k] >> shift) & 15];
        if (k < 7)
            out[o++] = ':';
    }
    out[o++] = ']';
    return o;
}

#endif
