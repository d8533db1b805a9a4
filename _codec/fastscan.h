/* The columnar decoder's fast path over the records of one uncompressed-or-decompressed v2 batch.
 *
 * Written in C so that the whole loop state lives in registers: the generic reader (reader.pxd)
 * goes through structs and out-parameters and is too large for the compiler to inline. This loop
 * takes the common shape only -- short varints, no headers, no overflow -- and stops at the first
 * record that is anything else (or malformed), leaving it to the generic reader, which raises the
 * precise error. It never reads outside [p, p + end) and never writes past what the caller
 * reserved (one row per record; key and value bytes bounded by the records region).
 */
#ifndef KAFKA_CORE_FASTSCAN_H
#define KAFKA_CORE_FASTSCAN_H

#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef struct {
    const uint8_t* p;  /* the records region */
    ssize_t pos;       /* next record */
    ssize_t end;
    int64_t base_offset, base_ts, max_ts;
    int log_append;
    int64_t* offs;
    int64_t* tss;
    int8_t* tys;
    char* kval;
    char* vval;
    int32_t* kos;
    int32_t* vos;
    int32_t* hos;
    int32_t nh;       /* header rows so far (constant here: records with headers are not taken) */
    char* kp;
    char* vp;
    ssize_t kl, vl;    /* bytes used in kp / vp */
    ssize_t knulls, vnulls;
} kc_scan;

/* Zigzag varint of at most 3 bytes at *q, read without a bounds check (the caller guarantees
 * three readable bytes); a longer one sets *bad, and the record goes to the generic reader. */
static inline int64_t kc_varint3(const uint8_t* p, ssize_t* q, int* bad) {
    ssize_t i = *q;
    uint32_t raw = p[i];
    if (raw < 0x80) {
        *q = i + 1;
    } else if (p[i + 1] < 0x80) {
        raw = (raw & 0x7F) | ((uint32_t)p[i + 1] << 7);
        *q = i + 2;
    } else {
        *bad |= p[i + 2] >= 0x80;
        raw = (raw & 0x7F) | ((uint32_t)(p[i + 1] & 0x7F) << 7) | ((uint32_t)p[i + 2] << 14);
        *q = i + 3;
    }
    return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}

/* Copy n bytes in 16-byte strides, over-reading and over-writing up to 15 bytes past n: the
 * caller has checked that both the source region and the destination buffer have that room. */
static inline void kc_copy16(char* restrict dst, const uint8_t* restrict src, int64_t n) {
    int64_t i;
    if (n > 48) {
        memcpy(dst, src, (size_t)n);
        return;
    }
    for (i = 0; i < n; i += 16) {
#if defined(__SSE2__) /* explicit: gcc turned the plain loop into a call to memmove */
        _mm_storeu_si128((__m128i*)(dst + i), _mm_loadu_si128((const __m128i*)(src + i)));
#else
        __builtin_memcpy(dst + i, src + i, 16);
#endif
    }
}

#define KC_SLACK 24 /* bytes a record must leave before the region's end to take the fast path */
#define KC_DELTA_MAX ((int64_t)1 << 21) /* a 3-byte zigzag varint is within +-2**20 */

/* Rows j.. of the batch while they take the fast path; returns the row reached.
 *
 * A record takes it when it ends at least KC_SLACK bytes before the region does: then no read
 * of a (3-byte at most) varint can leave the region, so only the lengths are checked, and the
 * final position must land exactly on the record's end. Key and value bytes are copied in
 * 16-byte strides that may run up to 15 bytes past them; that stays inside the region (source)
 * and inside the reservation of one records region per column (destination: a column holds
 * fewer bytes than the region has consumed). Offsets, timestamps and column sizes cannot
 * overflow when the batch passes the checks made once, before the loop. Everything is loaded
 * into locals (stores through the output pointers could otherwise alias the state struct), and
 * what is the same for every row is filled in after the loop: fewer live registers in it.
 * noinline: inlined into the decoder's large batch function it spilled its state to the stack
 * (and the helper thread of overlap.h calls it on its own anyway). */
static __attribute__((noinline)) ssize_t kc_scan_records(kc_scan* s, ssize_t j, ssize_t count) {
    const uint8_t* restrict p = s->p;
    ssize_t pos = s->pos;
    const ssize_t end = s->end;
    ssize_t kl = s->kl, vl = s->vl, knulls = s->knulls, vnulls = s->vnulls;
    const int64_t base_offset = s->base_offset, base_ts = s->base_ts, max_ts = s->max_ts;
    const int log_append = s->log_append;
    int64_t* restrict offs = s->offs;
    int64_t* restrict tss = s->tss;
    int8_t* restrict tys = s->tys;
    char* restrict kval = s->kval;
    char* restrict vval = s->vval;
    int32_t* restrict kos = s->kos;
    int32_t* restrict vos = s->vos;
    int32_t* restrict hos = s->hos;
    const int32_t nh = s->nh;
    char* restrict kp = s->kp;
    char* restrict vp = s->vp;
    int64_t length, ts_delta, off_delta, klen, vlen, kn, vn;
    ssize_t q, rend, kat, vat;
    int bad = 0;
    if (base_offset > INT64_MAX - KC_DELTA_MAX || base_offset < INT64_MIN + KC_DELTA_MAX ||
        base_ts > INT64_MAX - KC_DELTA_MAX || base_ts < INT64_MIN + KC_DELTA_MAX ||
        kl > INT32_MAX - end || vl > INT32_MAX - end) {
        return j; /* rare: the generic reader checks every record */
    }
    const ssize_t j0 = j;
    for (; j < count; j++) {
        q = pos;
        if (end - q < KC_SLACK) break;
        length = kc_varint3(p, &q, &bad);
        if (bad || length < 6 || length > end - q - KC_SLACK) break;
        rend = q + length;
        q += 1; /* attributes */
        ts_delta = kc_varint3(p, &q, &bad);
        off_delta = kc_varint3(p, &q, &bad);
        klen = kc_varint3(p, &q, &bad);
        if (bad || klen < -1 || klen > rend - q) break;
        kat = q;
        kn = klen > 0 ? klen : 0;
        q += kn;
        vlen = kc_varint3(p, &q, &bad);
        if (bad || vlen < -1 || vlen > rend - q) break;
        vat = q;
        vn = vlen > 0 ? vlen : 0;
        q += vn;
        if (p[q] != 0 || q + 1 != rend) break; /* header count 0, and the record ends here */
        offs[j] = base_offset + off_delta;
        tss[j] = base_ts + ts_delta;
        kval[j] = klen >= 0;
        vval[j] = vlen >= 0;
        kc_copy16(kp + kl, p + kat, kn);
        kl += kn;
        kc_copy16(vp + vl, p + vat, vn);
        vl += vn;
        kos[j] = (int32_t)kl;
        vos[j] = (int32_t)vl;
        pos = rend;
    }
    /* what is the same for every row of the batch, filled in after the loop */
    for (q = j0; q < j; q++) {
        tys[q] = (int8_t)(log_append != 0);
        hos[q] = nh;
        knulls += !kval[q];
        vnulls += !vval[q];
    }
    if (log_append) {
        for (q = j0; q < j; q++) tss[q] = max_ts;
    }
    s->pos = pos;
    s->kl = kl;
    s->vl = vl;
    s->knulls = knulls;
    s->vnulls = vnulls;
    return j;
}

#endif
