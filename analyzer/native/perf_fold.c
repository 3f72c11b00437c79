/* Byte loops of the perf script folding (dbdiag.parsers.perf_script).

   A Folder holds, across the pieces of one member, tables of distinct byte strings, each numbered
   in the order first met:
   - bodies: frame lines from after their address ("pv_native_safe_halt+0xb ([kernel.kallsyms])"),
     what perf_script._body keeps;
   - symbols: bodies that perf_script._frame_names surely names alike (same symbol without its
     offset, same dso; see add_symbol), one id for all of them;
   - stacks: a sample's symbol ids, leaf first, as its frame lines come under its header;
   - keys: sample header lines with their time replaced by " 0.0:", as perf_script._header_fields
     keys them (first match of \s(\d+\.\d+): ).
   Folder.scan(buffer, start, end) reads buffer[start:end] when it is regular perf script text and
   returns its samples counted per (key id, stack id) as packed arrays in bytes objects, or None for
   anything else (perf_script then reads the piece line by line); the byte loop runs without the
   GIL, so two Folders can scan pieces on two threads. Folder.symbols(), Folder.keys() and
   Folder.spell(names) give the strings back. What a refused piece added to the tables stays there,
   unused: a refused piece's counts are never returned. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { DONE = 0, IRREGULAR = 1, NO_MEMORY = 2 };

/* A chain this long only comes from crafted input: the piece is refused rather than slowed. */
#define MAX_PROBES 4096
#define MAX_ID 0xFFFFFFF0u

/* A bucket of a Table's index. The entry's place in the arena rides along, so a lookup reads the
   bucket, then the entry's length and bytes side by side. */
typedef struct {
    uint32_t id1; /* entry id + 1; 0 for an empty bucket */
    uint32_t tag; /* high half of the entry's hash */
    size_t at;
} Bucket;

typedef struct {
    size_t at; /* the entry's length (a size_t), then its bytes */
    uint64_t hash;
} Entry;

/* Distinct byte strings, copied into one arena, with an open-addressing index. */
typedef struct {
    Bucket *buckets;
    size_t mask;
    Entry *entries;
    size_t entries_room;
    uint32_t count;
    char *arena;
    size_t used, room;
} Table;

typedef struct {
    PyObject_HEAD
    Table bodies, symbols, stacks, keys;
    uint32_t *symbol_of; /* per body id, for the first `symbolized` bodies */
    size_t symbol_of_room;
    uint32_t symbolized;
    uint32_t *named_by; /* per symbol id, the body id that first had it */
    size_t named_by_room;
    uint32_t *ids; /* the symbols of the sample being read */
    size_t ids_room;
    char *key; /* the header key being built */
    size_t key_room;
    int busy;
} Folder;

/* One piece's samples counted per pair (key id, stack id): the pairs are a Table of 8-byte
   strings, key id << 32 | stack id. */
typedef struct {
    Table pairs;
    uint64_t *counts; /* per pair id */
    size_t counts_room;
    uint64_t samples;
    int timed;
    double first, last;
} Scan;

/* The hash of a byte string: hash_word over its 8-byte words, then over its last 8 bytes (or its
   bytes, when fewer) if its length is not a multiple of 8, then hash_end. */
#define HASH_SEED 0x243F6A8885A308D3ull

static uint64_t hash_word(uint64_t h, uint64_t word) {
    h = (h ^ word) * 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 29);
}

static uint64_t load_word(const char *data) {
    uint64_t word;
    memcpy(&word, data, 8);
    return word;
}

static uint64_t hash_end(uint64_t h, const char *data, size_t length) {
    if (length % 8) {
        uint64_t word = 0;
        if (length >= 8) {
            word = load_word(data + length - 8); /* some bytes hashed twice */
        } else {
            for (size_t j = 0; j < length; j++) word = word << 8 | (unsigned char)data[j];
        }
        h = hash_word(h, word);
    }
    h ^= (uint64_t)length * 0x9E3779B97F4A7C15ull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 33);
}

static uint64_t hash_bytes(const char *data, size_t length) {
    uint64_t h = HASH_SEED;
    for (size_t i = 0; i + 8 <= length; i += 8) h = hash_word(h, load_word(data + i));
    return hash_end(h, data, length);
}

/* Grow *buffer to hold at least `need` items of `size` bytes; 0 when memory runs out. */
static int reserve(void **buffer, size_t *room, size_t need, size_t size) {
    if (need <= *room) return 1;
    size_t grown = *room ? *room : 64;
    while (grown < need) {
        if (grown > SIZE_MAX / 2) return 0;
        grown *= 2;
    }
    if (grown > SIZE_MAX / size) return 0;
    void *moved = realloc(*buffer, grown * size);
    if (moved == NULL) return 0;
    *buffer = moved;
    *room = grown;
    return 1;
}

static void table_free(Table *t) {
    free(t->buckets);
    free(t->entries);
    free(t->arena);
    memset(t, 0, sizeof(*t));
}

static size_t length_at(const Table *t, size_t at) {
    size_t length;
    memcpy(&length, t->arena + at, sizeof(length));
    return length;
}

static const char *bytes_at(const Table *t, size_t at) { return t->arena + at + sizeof(size_t); }

/* The buckets, `count` of them (a power of two), entries placed again from their kept hashes. */
static int table_index(Table *t, size_t count) {
    if (count > SIZE_MAX / sizeof(Bucket)) return 0;
    Bucket *fresh = calloc(count, sizeof(Bucket));
    if (fresh == NULL) return 0;
    free(t->buckets);
    t->buckets = fresh;
    t->mask = count - 1;
    for (uint32_t id = 0; id < t->count; id++) {
        size_t i = (size_t)t->entries[id].hash & t->mask;
        while (t->buckets[i].id1) i = (i + 1) & t->mask;
        t->buckets[i].id1 = id + 1;
        t->buckets[i].tag = (uint32_t)(t->entries[id].hash >> 32);
        t->buckets[i].at = t->entries[id].at;
    }
    return 1;
}

/* The id of data[0:length] in t, added when new and accepted by check (when given); or IRREGULAR /
   NO_MEMORY in *status. */
static uint32_t intern_hashed(Table *t, const char *data, size_t length, uint64_t h,
                              int (*check)(const char *, size_t), int *status) {
    uint32_t tag = (uint32_t)(h >> 32);
    if (t->buckets == NULL && !table_index(t, 1024)) {
        *status = NO_MEMORY;
        return 0;
    }
    size_t i = (size_t)h & t->mask;
    for (int probes = 0; t->buckets[i].id1; probes++) {
        const Bucket *b = &t->buckets[i];
        if (b->tag == tag && length_at(t, b->at) == length && memcmp(bytes_at(t, b->at), data, length) == 0)
            return b->id1 - 1;
        if (probes > MAX_PROBES) {
            *status = IRREGULAR;
            return 0;
        }
        i = (i + 1) & t->mask;
    }
    if (check != NULL && !check(data, length)) {
        *status = IRREGULAR;
        return 0;
    }
    if (t->count >= MAX_ID || length > SIZE_MAX - sizeof(size_t) - t->used) {
        *status = IRREGULAR;
        return 0;
    }
    size_t at = t->used, need = t->used + sizeof(size_t) + length;
    if (!reserve((void **)&t->entries, &t->entries_room, (size_t)t->count + 1, sizeof(Entry))
        || !reserve((void **)&t->arena, &t->room, need, 1)) {
        *status = NO_MEMORY;
        return 0;
    }
    memcpy(t->arena + at, &length, sizeof(length));
    if (length) memcpy(t->arena + at + sizeof(length), data, length);
    t->used = need;
    uint32_t id = t->count++;
    t->entries[id].at = at;
    t->entries[id].hash = h;
    t->buckets[i].id1 = id + 1;
    t->buckets[i].tag = tag;
    t->buckets[i].at = at;
    if ((size_t)t->count * 2 > t->mask + 1 && !table_index(t, (t->mask + 1) * 2)) {
        *status = NO_MEMORY;
        return 0;
    }
    return id;
}

static uint32_t intern(Table *t, const char *data, size_t length, int (*check)(const char *, size_t), int *status) {
    return intern_hashed(t, data, length, hash_bytes(data, length), check, status);
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Only tab and printable ASCII (DEL included): then a regex \s is a space or a tab, \d is 0-9, and
   the text is the same whether read as bytes or as UTF-8. */
static int plain_text(const char *data, size_t length) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= length; i += 8) {
        uint64_t word;
        memcpy(&word, data + i, 8);
        /* some byte below 0x20 or above 0x7f: look closer (a tab is fine) */
        if (((word - ones * 0x20) & ~word & highs) || (word & highs)) {
            for (size_t j = i; j < i + 8; j++) {
                unsigned char c = (unsigned char)data[j];
                if ((c < 0x20 && c != '\t') || c > 0x7f) return 0;
            }
        }
    }
    for (; i < length; i++) {
        unsigned char c = (unsigned char)data[i];
        if ((c < 0x20 && c != '\t') || c > 0x7f) return 0;
    }
    return 1;
}

static const double POWERS_OF_TEN[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* "8296.836030" as the nearest double, or 0 when its digits are too many for this: a whole number
   below 10**15 over an exact power of ten is rounded once, so correctly (as polars casts it). */
static int time_value(const char *whole, size_t whole_length, const char *fraction, size_t fraction_length,
                      double *out) {
    int64_t value = 0;
    int significant = 0;
    if (fraction_length > 22) return 0;
    for (size_t i = 0; i < whole_length + fraction_length; i++) {
        char c = i < whole_length ? whole[i] : fraction[i - whole_length];
        if (value == 0 && c == '0') continue;
        if (++significant > 15) return 0;
        value = value * 10 + (c - '0');
    }
    *out = (double)value / POWERS_OF_TEN[fraction_length];
    return 1;
}

/* A sample header line: its key id, and its time folded into the piece's first and last. */
static int read_header(Folder *f, Scan *scan, const char *line, size_t length, uint32_t *key) {
    size_t at = length, colon = 0, dot = 0;
    for (size_t i = 0; i < length; i++) {
        if (!is_blank(line[i])) continue;
        size_t j = i + 1;
        while (j < length && is_digit(line[j])) j++;
        if (j == i + 1 || j >= length || line[j] != '.') continue;
        size_t d = j++;
        while (j < length && is_digit(line[j])) j++;
        if (j == d + 1 || j >= length || line[j] != ':') continue;
        at = i, dot = d, colon = j;
        break;
    }
    const char *text = line;
    size_t text_length = length;
    if (at < length) {
        double seconds;
        if (!time_value(line + at + 1, dot - at - 1, line + dot + 1, colon - dot - 1, &seconds)) return IRREGULAR;
        if (!scan->timed || seconds < scan->first) scan->first = seconds;
        if (!scan->timed || seconds > scan->last) scan->last = seconds;
        scan->timed = 1;
        /* the key: the line with " 0.0:" for the blank, the time and its colon */
        size_t tail = length - colon - 1;
        if (length > SIZE_MAX - 8 || !reserve((void **)&f->key, &f->key_room, at + 5 + tail, 1)) return NO_MEMORY;
        memcpy(f->key, line, at);
        memcpy(f->key + at, " 0.0:", 5);
        memcpy(f->key + at + 5, line + colon + 1, tail);
        text = f->key;
        text_length = at + 5 + tail;
    }
    int status = DONE;
    *key = intern(&f->keys, text, text_length, plain_text, &status);
    return status;
}

/* What a frame line holds after its address and a space when it matches _FRAME_PATTERN: a '(' then
   a ')' followed by blanks only; plain text. */
static int frame_body(const char *body, size_t length) {
    const char *last = body + length;
    while (last > body && is_blank(last[-1])) last--;
    if (last == body || last[-1] != ')' || memchr(body, '(', (size_t)(last - 1 - body)) == NULL) return 0;
    return plain_text(body, length);
}

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Byte tests on 8 bytes at once: each gives a word with the high bit of every byte that passes. */
#define WORDS 1
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
#define LOWS 0x7F7F7F7F7F7F7F7Full

static uint64_t nonzero_bytes(uint64_t w) { return (((w & LOWS) + LOWS) | w) & HIGHS; }

static uint64_t bytes_equal(uint64_t w, unsigned char c) { return ~nonzero_bytes(w ^ (ONES * c)) & HIGHS; }

/* bytes of x (all below 0x80) within [low, high] */
static uint64_t bytes_between(uint64_t x, unsigned low, unsigned high) {
    return (x + ONES * (0x80 - low)) & ~(x + ONES * (0x7F - high)) & HIGHS;
}

static uint64_t hex_bytes(uint64_t w) {
    uint64_t x = w & LOWS;
    return (bytes_between(x, '0', '9') | bytes_between(x | (ONES * 0x20), 'a', 'f')) & ~w;
}

/* how many bytes come before the first one that passed */
static size_t before_first(uint64_t passed) { return (size_t)__builtin_ctzll(passed) / 8; }
#endif

/* The first byte from p on (before limit) that is not a blank. */
static const char *skip_blanks(const char *p, const char *limit) {
#ifdef WORDS
    for (; p + 8 <= limit; p += 8) {
        uint64_t w = load_word(p), other = ~(bytes_equal(w, ' ') | bytes_equal(w, '\t')) & HIGHS;
        if (other) return p + before_first(other);
    }
#endif
    while (p < limit && is_blank(*p)) p++;
    return p;
}

/* The first byte from p on (before limit) that is not a hex digit. */
static const char *skip_hex(const char *p, const char *limit) {
#ifdef WORDS
    for (; p + 8 <= limit; p += 8) {
        uint64_t other = ~hex_bytes(load_word(p)) & HIGHS;
        if (other) return p + before_first(other);
    }
#endif
    while (p < limit && is_hex(*p)) p++;
    return p;
}

/* Where the body starts when the line starts as perf prints it, a tab then the address right-aligned
   in 16 columns and a space ("\t          83d61f "); NULL otherwise (then the bytes are read one by
   one). */
static const char *printed_address(const char *line, const char *limit) {
#ifdef WORDS
    if (limit - line < 18 || line[0] != '\t' || line[17] != ' ') return NULL;
    uint64_t first = load_word(line + 1), second = load_word(line + 9);
    uint64_t blanks = bytes_equal(first, ' ');
    if (blanks != HIGHS) {
        /* the address starts in the first 8 columns: hex from there on */
        uint64_t before = (1ull << (8 * before_first(~blanks & HIGHS))) - 1;
        return ((hex_bytes(first) | (before & HIGHS)) == HIGHS && hex_bytes(second) == HIGHS) ? line + 18 : NULL;
    }
    blanks = bytes_equal(second, ' ');
    if (blanks == HIGHS) return NULL;
    uint64_t before = (1ull << (8 * before_first(~blanks & HIGHS))) - 1;
    return (hex_bytes(second) | (before & HIGHS)) == HIGHS ? line + 18 : NULL;
#else
    return NULL;
#endif
}

/* The end of the line from p on (its '\n', or limit) and, in *h, the hash_bytes of the line. */
static const char *hash_line(const char *p, const char *limit, uint64_t *h) {
    const char *line = p;
    uint64_t sum = HASH_SEED;
#ifdef WORDS
    for (; p + 8 <= limit; p += 8) {
        uint64_t w = load_word(p), newline = bytes_equal(w, '\n');
        if (newline) {
            p += before_first(newline);
            *h = hash_end(sum, line, (size_t)(p - line));
            return p;
        }
        sum = hash_word(sum, w);
    }
#else
    for (; p + 8 <= limit && memchr(p, '\n', 8) == NULL; p += 8) sum = hash_word(sum, load_word(p));
#endif
    const char *newline = memchr(p, '\n', (size_t)(limit - p));
    p = newline ? newline : limit;
    *h = hash_end(sum, line, (size_t)(p - line));
    return p;
}

/* The symbol of a body met for the first time. perf_script._frame_names names a body from two parts
   (_BODY_PATTERN): sym, the longest prefix ending in a non-blank followed by blanks and a '(' that
   comes before the last ')', and dso, between that '(' and the last ')'; then sym loses a final
   "+0x<hex>" offset. Bodies whose '(' of the dso is the last '(' of the body, right after one space
   after a non-blank, have both parts read here, and share one symbol per (sym without offset, dso):
   their names are the same. Any other body is a symbol of its own. */
static int add_symbol(Folder *f, const char *body, size_t length) {
    const char *close = body + length;
    while (close > body && is_blank(close[-1])) close--;
    close--; /* the last ')', as frame_body checked */
    const char *open = close;
    while (open > body && *open != '(') open--;
    if (length > SIZE_MAX - 2 || !reserve((void **)&f->key, &f->key_room, length + 2, 1)
        || !reserve((void **)&f->symbol_of, &f->symbol_of_room, (size_t)f->symbolized + 1, sizeof(uint32_t))
        || !reserve((void **)&f->named_by, &f->named_by_room, (size_t)f->symbols.count + 1, sizeof(uint32_t)))
        return NO_MEMORY;
    size_t used;
    if (open - body >= 2 && open[-1] == ' ' && !is_blank(open[-2])) {
        const char *sym_end = open - 1, *hex = sym_end;
        while (hex > body && is_hex(hex[-1])) hex--;
        if (hex < sym_end && hex - body >= 3 && memcmp(hex - 3, "+0x", 3) == 0) sym_end = hex - 3;
        size_t sym = (size_t)(sym_end - body), dso = (size_t)(close - open - 1);
        f->key[0] = 1;
        memcpy(f->key + 1, body, sym);
        f->key[1 + sym] = '\n'; /* in no body */
        memcpy(f->key + 2 + sym, open + 1, dso);
        used = 2 + sym + dso;
    } else {
        f->key[0] = 2;
        memcpy(f->key + 1, body, length);
        used = 1 + length;
    }
    int status = DONE;
    uint32_t known = f->symbols.count, symbol = intern(&f->symbols, f->key, used, NULL, &status);
    if (status != DONE) return status;
    if (symbol == known) f->named_by[symbol] = f->symbolized;
    f->symbol_of[f->symbolized++] = symbol;
    return DONE;
}

/* An indented frame line "\t  addr symbol+0x1f (dso)" at line, in a piece ending at limit: the
   symbol of its body (what follows the address and one space, where perf_script._body cuts) in
   *symbol, and where the line ends in *stop. The line must start as _FRAME_PATTERN says, with one
   space after the address; the body is checked by frame_body when first met. */
static int read_frame(Folder *f, const char *line, const char *limit, uint32_t *symbol, const char **stop) {
    const char *body = printed_address(line, limit);
    if (body == NULL) {
        const char *address = skip_blanks(line, limit), *p = skip_hex(address, limit);
        if (p == address || p >= limit || *p != ' ') return IRREGULAR;
        body = p + 1;
    }
    uint64_t hash;
    *stop = hash_line(body, limit, &hash);
    int status = DONE;
    Table *bodies = &f->bodies;
    uint32_t id = intern_hashed(bodies, body, (size_t)(*stop - body), hash, frame_body, &status);
    if (status != DONE) return status;
    while (f->symbolized <= id) {
        size_t at = bodies->entries[f->symbolized].at;
        if ((status = add_symbol(f, bytes_at(bodies, at), length_at(bodies, at))) != DONE) return status;
    }
    *symbol = f->symbol_of[id];
    return DONE;
}

/* The sample read (its symbols in f->ids): its stack id, counted with its key. */
static int end_sample(Folder *f, Scan *scan, uint32_t key, size_t frames) {
    int status = DONE;
    uint32_t stack = intern(&f->stacks, (const char *)f->ids, frames * sizeof(uint32_t), NULL, &status);
    if (status != DONE) return status;
    uint64_t pair = (uint64_t)key << 32 | stack;
    uint32_t known = scan->pairs.count, id = intern(&scan->pairs, (const char *)&pair, sizeof(pair), NULL, &status);
    if (status != DONE) return status;
    if (id == known) {
        if (!reserve((void **)&scan->counts, &scan->counts_room, (size_t)id + 1, sizeof(uint64_t))) return NO_MEMORY;
        scan->counts[id] = 0;
    }
    scan->counts[id]++;
    scan->samples++;
    return DONE;
}

/* The samples of data[0:size]: comment lines ('#') before the first header only, then samples,
   each a header line, its frame lines (indented by a tab or a space) and empty lines; a header
   is any other non-empty line. Anything else is IRREGULAR. */
static int scan_piece(Folder *f, const char *data, size_t size, Scan *scan) {
    const char *p = data, *end = data + size;
    int started = 0, after_empty = 0, status;
    uint32_t key = 0;
    size_t frames = 0;
    while (p < end) {
        if (is_blank(*p)) {
            if (!started || after_empty) return IRREGULAR;
            if (frames == f->ids_room && !reserve((void **)&f->ids, &f->ids_room, frames + 1, sizeof(uint32_t)))
                return NO_MEMORY;
            const char *stop;
            if ((status = read_frame(f, p, end, &f->ids[frames], &stop)) != DONE) return status;
            frames++;
            p = stop < end ? stop + 1 : end;
            continue;
        }
        const char *newline = memchr(p, '\n', (size_t)(end - p));
        const char *stop = newline ? newline : end;
        size_t length = (size_t)(stop - p);
        if (length == 0) {
            after_empty = 1;
        } else if (*p == '#') {
            if (started) return IRREGULAR;
        } else {
            if (started && (status = end_sample(f, scan, key, frames)) != DONE) return status;
            if ((status = read_header(f, scan, p, length, &key)) != DONE) return status;
            started = 1;
            frames = 0;
        }
        if (length) after_empty = 0;
        p = newline ? newline + 1 : end;
    }
    if (!started) return IRREGULAR;
    return end_sample(f, scan, key, frames);
}

/* The key ids (shift 32) or the stack ids (shift 0) of a scan's pairs, packed uint32. */
static PyObject *packed_ids(const Table *pairs, int shift) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)pairs->count * 4);
    if (out == NULL) return NULL;
    uint32_t *ids = (uint32_t *)PyBytes_AS_STRING(out);
    for (uint32_t n = 0; n < pairs->count; n++) {
        uint64_t pair;
        memcpy(&pair, bytes_at(pairs, pairs->entries[n].at), sizeof(pair));
        ids[n] = (uint32_t)(pair >> shift);
    }
    return out;
}

/* 0 with an exception set when a scan of this Folder runs on another thread (its tables are changing). */
static int idle(Folder *self) {
    if (!self->busy) return 1;
    PyErr_SetString(PyExc_RuntimeError, "a scan of this Folder is running on another thread");
    return 0;
}

static PyObject *folder_scan(Folder *self, PyObject *args) {
    PyObject *object;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "Onn", &object, &start, &end)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(object, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (start < 0 || end < start || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start and end must lie within the buffer, start <= end");
        return NULL;
    }
    if (!idle(self)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    self->busy = 1;
    Scan scan;
    memset(&scan, 0, sizeof(scan));
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_piece(self, (const char *)view.buf + start, (size_t)(end - start), &scan);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (status == NO_MEMORY) {
        PyErr_NoMemory();
    } else if (status == IRREGULAR) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject *keys = packed_ids(&scan.pairs, 32), *stacks = packed_ids(&scan.pairs, 0);
        PyObject *samples = PyBytes_FromStringAndSize((const char *)scan.counts, (Py_ssize_t)scan.pairs.count * 8);
        if (keys && stacks && samples) {
            if (scan.timed)
                result = Py_BuildValue("KddOOO", (unsigned long long)scan.samples, scan.first, scan.last, keys,
                                       stacks, samples);
            else
                result = Py_BuildValue("KOOOOO", (unsigned long long)scan.samples, Py_None, Py_None, keys,
                                       stacks, samples);
        }
        Py_XDECREF(keys);
        Py_XDECREF(stacks);
        Py_XDECREF(samples);
    }
    table_free(&scan.pairs);
    free(scan.counts);
    return result;
}

static PyObject *strings_of(const Table *t) {
    PyObject *out = PyList_New(t->count);
    if (out == NULL) return NULL;
    for (uint32_t id = 0; id < t->count; id++) {
        /* the tables hold tab and printable ASCII only */
        size_t at = t->entries[id].at;
        PyObject *s = PyUnicode_DecodeASCII(bytes_at(t, at), (Py_ssize_t)length_at(t, at), "strict");
        if (s == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, id, s);
    }
    return out;
}

static PyObject *folder_symbols(Folder *self, PyObject *unused) {
    if (!idle(self)) return NULL;
    PyObject *out = PyList_New(self->symbols.count);
    if (out == NULL) return NULL;
    for (uint32_t symbol = 0; symbol < self->symbols.count; symbol++) {
        size_t at = self->bodies.entries[self->named_by[symbol]].at;
        PyObject *s = PyUnicode_DecodeASCII(bytes_at(&self->bodies, at), (Py_ssize_t)length_at(&self->bodies, at),
                                            "strict");
        if (s == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, symbol, s);
    }
    return out;
}

static PyObject *folder_keys(Folder *self, PyObject *unused) { return idle(self) ? strings_of(&self->keys) : NULL; }

static PyObject *folder_spell(Folder *self, PyObject *names) {
    if (!idle(self)) return NULL;
    if (!PyList_Check(names) || PyList_GET_SIZE(names) < (Py_ssize_t)self->symbols.count) {
        PyErr_SetString(PyExc_ValueError, "spell(names) needs a list with a name (str or None) per symbol id");
        return NULL;
    }
    uint32_t count = self->symbols.count;
    const char **text = PyMem_Calloc(count ? count : 1, sizeof(char *));
    Py_ssize_t *length = PyMem_Calloc(count ? count : 1, sizeof(Py_ssize_t));
    PyObject *stacks = NULL, *leaves = NULL, *result = NULL;
    char *buffer = NULL;
    size_t room = 0;
    if (text == NULL || length == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (uint32_t id = 0; id < count; id++) {
        PyObject *name = PyList_GET_ITEM(names, id);
        if (name == Py_None) continue;
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "names must be str or None");
            goto done;
        }
        if ((text[id] = PyUnicode_AsUTF8AndSize(name, &length[id])) == NULL) goto done;
    }
    const Table *t = &self->stacks;
    stacks = PyList_New(t->count);
    leaves = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)t->count * 4);
    if (stacks == NULL || leaves == NULL) goto done;
    int32_t *leaf = (int32_t *)PyBytes_AS_STRING(leaves);
    for (uint32_t s = 0; s < t->count; s++) {
        const char *ids = bytes_at(t, t->entries[s].at);
        size_t frames = length_at(t, t->entries[s].at) / sizeof(uint32_t), used = 0;
        leaf[s] = -1;
        /* root first: the leaf is the first line under the header */
        for (size_t k = frames; k-- > 0;) {
            uint32_t id;
            memcpy(&id, ids + k * sizeof(uint32_t), sizeof(id)); /* the arena keeps no alignment */
            if (text[id] == NULL) continue;
            size_t need = used + 1 + (size_t)length[id];
            if (need <= used || !reserve((void **)&buffer, &room, need, 1)) {
                PyErr_NoMemory();
                goto done;
            }
            if (leaf[s] >= 0) buffer[used++] = ';';
            memcpy(buffer + used, text[id], (size_t)length[id]);
            used += (size_t)length[id];
            leaf[s] = (int32_t)id;
        }
        PyObject *spelled =
            leaf[s] < 0 ? Py_NewRef(Py_None) : PyUnicode_DecodeUTF8(used ? buffer : "", (Py_ssize_t)used, "strict");
        if (spelled == NULL) goto done;
        PyList_SET_ITEM(stacks, s, spelled);
    }
    result = PyTuple_Pack(2, stacks, leaves);
done:
    Py_XDECREF(stacks);
    Py_XDECREF(leaves);
    PyMem_Free(text);
    PyMem_Free(length);
    free(buffer);
    return result;
}

static PyObject *folder_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) || (kwargs && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "Folder() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0); /* zeroed: empty tables */
}

static void folder_dealloc(Folder *self) {
    table_free(&self->bodies);
    table_free(&self->symbols);
    free(self->symbol_of);
    free(self->named_by);
    table_free(&self->stacks);
    table_free(&self->keys);
    free(self->ids);
    free(self->key);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef folder_methods[] = {
    {"scan", (PyCFunction)folder_scan, METH_VARARGS,
     "scan(buffer, start, end) -> (samples, first_time, last_time, key_ids, stack_ids, counts) or None\n\n"
     "The samples of regular perf script text buffer[start:end] per (key id, stack id): key_ids and\n"
     "stack_ids packed uint32, counts packed uint64 (native order); first_time and last_time are the\n"
     "earliest and latest sample times (None without times). None when the text is not regular."},
    {"symbols", (PyCFunction)folder_symbols, METH_NOARGS,
     "symbols() -> per symbol id, the first frame body met with it (what perf_script._frame_names names)"},
    {"keys", (PyCFunction)folder_keys, METH_NOARGS, "keys() -> list of the header keys, by key id"},
    {"spell", (PyCFunction)folder_spell, METH_O,
     "spell(names) -> (stacks, leaves)\n\n"
     "names: a str or None per symbol id. stacks: per stack id, the names root first joined by ';'\n"
     "(symbols named None left out), None when no name is left; leaves: packed int32, per stack id the\n"
     "symbol id of its leaf (its last name), -1 when none."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FolderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dbdiag._perf_fold.Folder",
    .tp_doc = "Distinct frame bodies, symbols, stacks and header keys of one perf script member; scans its pieces.",
    .tp_basicsize = sizeof(Folder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = folder_new,
    .tp_dealloc = (destructor)folder_dealloc,
    .tp_methods = folder_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_perf_fold", "Byte loops of dbdiag's perf script folding (see perf_fold.c).", -1, NULL,
};

PyMODINIT_FUNC PyInit__perf_fold(void) {
    if (PyType_Ready(&FolderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Folder", (PyObject *)&FolderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
