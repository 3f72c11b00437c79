/* Byte loops of the MySQL/MariaDB slow-log parser (dbdiag.parsers.mysql_slowlog).

   lines() cuts a piece of the log into lines (as Arrow string views over the piece, no copy) and
   classifies each one with exactly the rules of mysql_slowlog._classify; mark() numbers the entries
   like mysql_slowlog._mark; distinct(), header_codes() and sequences() number repeated texts (what
   mysql_slowlog does with hashes in polars); query_times() reads the plain "# Query_time:" lines;
   statements() joins each entry's statement lines (mysql_slowlog._sql).
   Results are packed arrays in bytes objects (read with numpy.frombuffer); the byte loops run
   without the GIL. Every function checks its arguments: no read outside the given buffers. */

#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Line kinds: the numbers of mysql_slowlog's SQL, BLANK, ... constants (checked by a test). */
enum { SQL, BLANK, TIME, USER_HOST, QUERY_TIME, ATTR_START, ATTR, EXPLAIN, ADMIN, USE, SET_META, SERVER,
       BANNER_CANDIDATE };

#define starts_with(line, length, prefix) \
    ((size_t)(length) >= sizeof(prefix) - 1 && memcmp((line), (prefix), sizeof(prefix) - 1) == 0)

#define CODE(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

static uint8_t kind_of(const char *line, Py_ssize_t length, uint32_t head) {
    if (length == 0) return BLANK;
    if ((head & 0xFFFF) != CODE('#', ' ', 0, 0)) {
        if (length == 1 && line[0] == '#') return ATTR;
        if (head == CODE('S', 'E', 'T', ' ')
            && (starts_with(line, length, "SET timestamp=") || starts_with(line, length, "SET insert_id=")
                || starts_with(line, length, "SET last_insert_id=")))
            return SET_META;
        if (head == CODE('u', 's', 'e', ' ')) return USE;
        return SQL;
    }
    switch (head) {
    case CODE('#', ' ', 'T', 'i'): return starts_with(line, length, "# Time:") ? TIME : ATTR;
    case CODE('#', ' ', 'U', 's'): return USER_HOST;
    case CODE('#', ' ', 'Q', 'u'): return QUERY_TIME;
    case CODE('#', ' ', 'e', 'x'): return EXPLAIN;
    case CODE('#', ' ', 'a', 'd'): return starts_with(line, length, "# administrator command:") ? ADMIN : ATTR;
    case CODE('#', ' ', 'T', 'h'): return ATTR_START;
    case CODE('#', ' ', 'S', 'c'): return starts_with(line, length, "# Schema:") ? ATTR_START : ATTR;
    case CODE('#', ' ', 'C', 'l'): return starts_with(line, length, "# Client:") ? ATTR_START : ATTR;
    default: return ATTR;
    }
}

static int get_range(PyObject *object, Py_ssize_t start, Py_ssize_t end, Py_buffer *view) {
    if (PyObject_GetBuffer(object, view, PyBUF_SIMPLE) < 0) return -1;
    if (start < 0 || end < start || end > view->len) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "start/end outside the buffer");
        return -1;
    }
    return 0;
}

/* The number of '\n' in s[0:n], and whether every byte is ASCII. */
static Py_ssize_t count_lines(const char *s, Py_ssize_t n, int *ascii) {
    Py_ssize_t count = 0, i = 0;
    unsigned high = 0;
#ifdef __SSE2__
    const __m128i newline = _mm_set1_epi8('\n');
    __m128i any = _mm_setzero_si128();
    while (i + 16 <= n) {
        __m128i counts = _mm_setzero_si128();  /* per byte lane: at most 255 blocks before summing */
        for (int k = 0; k < 255 && i + 16 <= n; k++, i += 16) {
            __m128i block = _mm_loadu_si128((const __m128i *)(s + i));
            counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(block, newline));
            any = _mm_or_si128(any, block);
        }
        __m128i sums = _mm_sad_epu8(counts, _mm_setzero_si128());
        count += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
    }
    high = (unsigned)_mm_movemask_epi8(any);
#endif
    for (; i < n; i++) {
        count += s[i] == '\n';
        high |= (unsigned char)s[i] >> 7;
    }
    *ascii = !high;
    return count;
}

static int valid_utf8(const unsigned char *s, Py_ssize_t n);

/* The 16-byte string view of a line: length, then up to 12 bytes inline (zero padded), else the
   first four bytes, buffer 0 and the offset from base. Reads no byte at or past stop. */
static void make_view(uint32_t *v, const char *at, uint32_t length, const char *base, const char *stop) {
    v[0] = length;
    if (length > 12) {
        memcpy(v + 1, at, 4);
        v[2] = 0;
        v[3] = (uint32_t)(at - base);
    } else if (stop - at >= 12) {
        uint64_t low;
        uint32_t high;
        memcpy(&low, at, 8);
        memcpy(&high, at + 8, 4);
        low &= length >= 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * length)) - 1;
        high &= length >= 12 ? ~(uint32_t)0 : length <= 8 ? 0 : ((uint32_t)1 << (8 * (length - 8))) - 1;
        memcpy(v + 1, &low, 8);
        v[3] = high;
    } else {
        memset(v + 1, 0, 12);
        memcpy(v + 1, at, length);
    }
}

/* lines(buffer, start, end, cr_mode) -> (views, kind), or None when buffer[start:end] is not UTF-8

   views: one 16-byte Arrow string view per line of buffer[start:end] (the line without its '\n'
   and '\r' ends), over buffer[start:end] as data buffer 0: length (uint32), then the bytes inline
   (zero padded) up to 12 bytes, else the first four bytes, buffer 0, offset (uint32). So the
   first two uint32 of a view are the line's length and its first four bytes, zero padded.
   kind: one byte per line (SQL, BLANK, ...; BANNER_CANDIDATE for the SQL lines next to a
   "Tcp port" line, which the caller checks against the banner pattern).
   cr_mode 1: a line loses one trailing '\r' (what polars' CSV reader does to decoded text);
   cr_mode 2: raw bytes read as pipeline.decode then that reader would: '\r\n' became '\n' first,
   so a line ended by '\n' loses up to two trailing '\r', the last line (no '\n') one.
   UTF-8 here is strict (RFC 3629: what bytes.decode("utf-8") accepts). */
static PyObject *lines(PyObject *self, PyObject *args) {
    PyObject *object;
    Py_ssize_t start, end;
    int cr_mode;
    if (!PyArg_ParseTuple(args, "Onni", &object, &start, &end, &cr_mode)) return NULL;
    if (cr_mode != 1 && cr_mode != 2) {
        PyErr_SetString(PyExc_ValueError, "cr_mode is 1 or 2");
        return NULL;
    }
    Py_buffer view;
    if (get_range(object, start, end, &view) < 0) return NULL;
    if (end - start > INT32_MAX) {  /* offsets and lengths of string views are 32-bit */
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "a piece of more than 2 GiB");
        return NULL;
    }
    const char *data = view.buf;

    Py_ssize_t n;
    int ascii, valid = 1;
    Py_BEGIN_ALLOW_THREADS
    n = count_lines(data + start, end - start, &ascii);
    if (end > start && data[end - 1] != '\n') n++;
    if (!ascii) valid = valid_utf8((const unsigned char *)data + start, end - start);
    Py_END_ALLOW_THREADS
    if (!valid) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }

    PyObject *views = PyBytes_FromStringAndSize(NULL, n * 16);
    PyObject *kinds = PyBytes_FromStringAndSize(NULL, n);
    if (!views || !kinds) {
        Py_XDECREF(views);
        Py_XDECREF(kinds);
        PyBuffer_Release(&view);
        return NULL;
    }
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(views);
    uint8_t *kind = (uint8_t *)PyBytes_AS_STRING(kinds);
    Py_BEGIN_ALLOW_THREADS
    const char *base = data + start, *at = base, *stop = data + end;
    Py_ssize_t i = 0, length_all = end - start;
    for (Py_ssize_t block = 0; block < length_all; block += 16) {
        /* the '\n' of 16 bytes at a time as bits (memchr per line costs more on short lines) */
        unsigned newlines = 0;
#ifdef __SSE2__
        if (block + 16 <= length_all)
            newlines = (unsigned)_mm_movemask_epi8(
                _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(base + block)), _mm_set1_epi8('\n')));
        else
#endif
            for (Py_ssize_t k = 0; block + k < length_all && k < 16; k++) newlines |= (unsigned)(base[block + k] == '\n') << k;
        for (; newlines && i < n; newlines &= newlines - 1) {  /* i < n: a buffer changed under us stays in bounds */
            const char *newline = base + block + __builtin_ctz(newlines), *line_end = newline;
            for (int strip = cr_mode; strip > 0 && line_end > at && line_end[-1] == '\r'; strip--) line_end--;
            make_view(out + 4 * i, at, (uint32_t)(line_end - at), base, stop);
            kind[i] = kind_of(at, line_end - at, out[4 * i + 1]);
            i++;
            at = newline + 1;
        }
    }
    if (at < stop && i < n) {  /* the last line has no '\n' */
        const char *line_end = stop;
        if (line_end[-1] == '\r') line_end--;
        make_view(out + 4 * i, at, (uint32_t)(line_end - at), base, stop);
        kind[i] = kind_of(at, line_end - at, out[4 * i + 1]);
        i++;
    }
    for (; i < n; i++) {  /* only if the buffer changed between the two passes */
        memset(out + 4 * i, 0, 16);
        kind[i] = BLANK;
    }
    /* a server start banner is three lines around "Tcp port: N  Unix socket: ..." */
    for (Py_ssize_t line = 0; line < n; line++) {
        uint32_t head = out[4 * line + 1];
        if (head != CODE('T', 'c', 'p', ' ') && head != CODE('T', 'C', 'P', ' ')) continue;
        for (Py_ssize_t j = line - 1; j <= line + 1; j++)
            if (j >= 0 && j < n && kind[j] == SQL) kind[j] = BANNER_CANDIDATE;
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&view);
    return Py_BuildValue("(NN)", views, kinds);
}

static PyObject *int64_bytes(const int64_t *values, Py_ssize_t n) {
    return PyBytes_FromStringAndSize((const char *)values, n * (Py_ssize_t)sizeof(int64_t));
}

/* A growable int64 array. */
typedef struct {
    int64_t *values;
    Py_ssize_t n, capacity;
} Int64s;

static int int64s_push(Int64s *list, int64_t value) {
    if (list->n == list->capacity) {
        Py_ssize_t capacity = list->capacity ? 2 * list->capacity : 1024;
        int64_t *values = realloc(list->values, (size_t)capacity * sizeof(int64_t));
        if (!values) return -1;
        list->values = values;
        list->capacity = capacity;
    }
    list->values[list->n++] = value;
    return 0;
}

/* mark(kind, views) -> dict: what _mark computes, for kinds with the banners resolved. Entries are
   numbered by the entry starts up to and including a line (0 before the first header).
   role: uint8 per line, bit 0 the line is statement text, bit 1 a "use db;" that is metadata,
   bit 2 a "SET timestamp=" that is metadata, bit 3 the line starts an entry.
   starts, sql, explain, server: int64 line numbers of the entry starts, the statement text, the
   explain lines that are not statement text, the server banner lines; sql_entry, explain_entry:
   the entry of each of those sql and explain lines; time, query_time: int64 per entry, its first
   # Time / # Query_time line or -1; head: the first line of entry 0 that is not blank or a banner
   line, or -1; explain_kind: an explain line exists (statement text or not); innodb: a header
   line (not statement text) starts with "#   " (Percona's InnoDB lines). */
static PyObject *mark(PyObject *self, PyObject *args) {
    Py_buffer kinds, views;
    if (!PyArg_ParseTuple(args, "y*y*", &kinds, &views)) return NULL;
    Py_ssize_t n = kinds.len;
    PyObject *result = NULL;
    if (views.len != 16 * n) {
        PyErr_SetString(PyExc_ValueError, "mark: one view per kind");
        goto done;
    }
    PyObject *roles = PyBytes_FromStringAndSize(NULL, n);
    Int64s starts = {0}, sql = {0}, explain = {0}, server = {0}, time = {0}, query_time = {0};
    Int64s sql_entry = {0}, explain_entry = {0};
    if (!roles) goto done;
    const uint8_t *kind = kinds.buf;
    const uint32_t *view = views.buf;
    uint8_t *role = (uint8_t *)PyBytes_AS_STRING(roles);
    int64_t head = -1;
    int failed = 0, explain_kind = 0, innodb = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t number = 0;
    int previous_header = 0, previous_time = 0, plain_before = 0, set_before = 0;
    failed |= int64s_push(&time, -1) | int64s_push(&query_time, -1);
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        uint8_t k = kind[i];
        int start = k == TIME || (k == USER_HOST && !previous_time)
                    || ((k == QUERY_TIME || k == ATTR_START) && !previous_header);
        if (start) {
            number++;
            plain_before = set_before = 0;
            failed |= int64s_push(&starts, i) | int64s_push(&time, -1) | int64s_push(&query_time, -1);
            if (failed) break;
        }
        int plain = k == SQL || k == ADMIN;
        int is_sql = plain || (k == USE && (plain_before || set_before)) || (k == SET_META && plain_before)
                     || ((k == ATTR || k == EXPLAIN || k == BLANK) && plain_before);
        role[i] = (uint8_t)(is_sql | (k == USE && !plain_before && !set_before) << 1
                            | (k == SET_META && !plain_before) << 2 | start << 3);
        if (is_sql) failed |= int64s_push(&sql, i) | int64s_push(&sql_entry, number);
        else if (k == EXPLAIN) failed |= int64s_push(&explain, i) | int64s_push(&explain_entry, number);
        else if (k == SERVER) failed |= int64s_push(&server, i);
        else if (k == TIME && time.values[number] < 0) time.values[number] = i;
        else if (k == QUERY_TIME && query_time.values[number] < 0) query_time.values[number] = i;
        if (!is_sql && view[4 * i + 1] == CODE('#', ' ', ' ', ' ')) innodb = 1;
        if (number == 0 && head < 0 && k != BLANK && k != SERVER) head = i;
        explain_kind |= k == EXPLAIN;
        plain_before |= plain;
        set_before |= k == SET_META;
        previous_time = k == TIME;
        previous_header = k == TIME || k == USER_HOST || k == QUERY_TIME || k == ATTR_START || k == ATTR || k == EXPLAIN;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        Py_DECREF(roles);
        PyErr_NoMemory();
    } else {
        result = Py_BuildValue(
            "{sNsNsNsNsNsNsNsNsNsLsOsO}", "role", roles, "starts", int64_bytes(starts.values, starts.n),
            "sql", int64_bytes(sql.values, sql.n), "sql_entry", int64_bytes(sql_entry.values, sql_entry.n),
            "explain", int64_bytes(explain.values, explain.n),
            "explain_entry", int64_bytes(explain_entry.values, explain_entry.n),
            "server", int64_bytes(server.values, server.n), "time", int64_bytes(time.values, time.n),
            "query_time", int64_bytes(query_time.values, query_time.n), "head", (long long)head,
            "explain_kind", explain_kind ? Py_True : Py_False, "innodb", innodb ? Py_True : Py_False);
    }
    free(starts.values);
    free(sql_entry.values);
    free(explain_entry.values);
    free(sql.values);
    free(explain.values);
    free(server.values);
    free(time.values);
    free(query_time.values);
done:
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&views);
    return result;
}

/* The lines of a lines() result, by number: the piece's bytes and its string views. */
typedef struct {
    Py_buffer data, views, at;
    const char *piece;
    Py_ssize_t piece_length, n_lines, n_at;
    const uint32_t *view;
    const int64_t *index;
} Lines;

static void release_lines(Lines *lines) {
    PyBuffer_Release(&lines->data);
    PyBuffer_Release(&lines->views);
    PyBuffer_Release(&lines->at);
}

/* Arguments (buffer, start, end, views, at): at holds int64 line numbers (-1: none). */
static int get_lines(PyObject *args, Lines *lines) {
    Py_ssize_t start, end;
    memset(lines, 0, sizeof *lines);
    if (!PyArg_ParseTuple(args, "y*nny*y*", &lines->data, &start, &end, &lines->views, &lines->at)) return -1;
    if (start < 0 || end < start || end > lines->data.len || lines->views.len % 16 || lines->at.len % 8) {
        release_lines(lines);
        PyErr_SetString(PyExc_ValueError, "bad piece bounds, views or line numbers");
        return -1;
    }
    lines->piece = (const char *)lines->data.buf + start;
    lines->piece_length = end - start;
    lines->view = lines->views.buf;
    lines->n_lines = lines->views.len / 16;
    lines->index = lines->at.buf;
    lines->n_at = lines->at.len / 8;
    return 0;
}

/* The bytes of line number i; 0 when there is no such line (or its view points outside the piece),
   and then *text and *length are left as they were (callers keep their empty text). The view is
   read once: the bounds checked are the bounds used, even if the views change meanwhile. */
static int line_bytes(const Lines *lines, int64_t i, const char **text, uint32_t *length) {
    if (i < 0 || i >= lines->n_lines) return 0;
    const uint32_t *v = lines->view + 4 * i;
    uint32_t size = v[0], offset = v[3];
    if (size <= 12) {
        *text = (const char *)(v + 1);
        *length = size;
        return 1;
    }
    if ((Py_ssize_t)offset + (Py_ssize_t)size > lines->piece_length) return 0;
    *text = lines->piece + offset;
    *length = size;
    return 1;
}

static uint64_t hash_bytes(const char *text, uint32_t length) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ length;
    uint64_t i = 0;  /* 64-bit: i + 8 would wrap to 0 in 32 bits past 2**32 - 8 bytes (a loop that never ends) */
    for (; i + 8 <= length; i += 8) {
        uint64_t word;
        memcpy(&word, text + i, 8);
        h = (h ^ word) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    memcpy(&tail, text + i, length - i);
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

/* A slot of a small cache of recent texts (0-255) from the length and eight bytes in the middle:
   a hit, confirmed by a compare, saves hashing the whole text. */
static unsigned recent_slot(const char *text, uint32_t length) {
    uint64_t middle = 0;
    memcpy(&middle, text + (length >= 8 ? (length - 8) / 2 : 0), length >= 8 ? 8 : length);
    return (unsigned)(((middle ^ length) * 0x9E3779B97F4A7C15ULL) >> 56);
}

/* A set of distinct byte strings, numbered in first-seen order (open addressing, grown when half full). */
typedef struct {
    Py_ssize_t n, capacity, slots;
    int64_t *table;        /* slot -> number, -1 empty */
    uint64_t *hash;        /* number -> hash */
    const char **text;     /* number -> bytes (inside the caller's buffers) */
    uint32_t *length;      /* number -> length */
    int failed;            /* out of memory */
} Texts;

static int texts_init(Texts *texts) {
    memset(texts, 0, sizeof *texts);
    texts->slots = 1024;
    texts->table = malloc((size_t)texts->slots * sizeof(int64_t));
    if (!texts->table) return -1;
    for (Py_ssize_t s = 0; s < texts->slots; s++) texts->table[s] = -1;
    return 0;
}

static void texts_free(Texts *texts) {
    free(texts->table);
    free(texts->hash);
    free(texts->text);
    free(texts->length);
}

static int texts_grow(Texts *texts) {
    if (texts->n == texts->capacity) {
        Py_ssize_t capacity = texts->capacity ? 2 * texts->capacity : 256;
        uint64_t *hash = realloc(texts->hash, (size_t)capacity * sizeof *hash);
        if (hash) texts->hash = hash;
        const char **text = realloc(texts->text, (size_t)capacity * sizeof *text);
        if (text) texts->text = text;
        uint32_t *length = realloc(texts->length, (size_t)capacity * sizeof *length);
        if (length) texts->length = length;
        if (!hash || !text || !length) return -1;
        texts->capacity = capacity;
    }
    if (2 * (texts->n + 1) > texts->slots) {
        Py_ssize_t slots = 2 * texts->slots;
        int64_t *table = malloc((size_t)slots * sizeof(int64_t));
        if (!table) return -1;
        for (Py_ssize_t s = 0; s < slots; s++) table[s] = -1;
        for (Py_ssize_t d = 0; d < texts->n; d++) {
            Py_ssize_t at = (Py_ssize_t)(texts->hash[d] & (uint64_t)(slots - 1));
            while (table[at] >= 0) at = (at + 1) & (slots - 1);
            table[at] = d;
        }
        free(texts->table);
        texts->table = table;
        texts->slots = slots;
    }
    return 0;
}

/* The number of a text (a new one if unseen); -1 when out of memory. *added tells whether it is new. */
static int64_t texts_code(Texts *texts, const char *text, uint32_t length, int *added) {
    uint64_t hash = hash_bytes(text, length);
    *added = 0;
    for (Py_ssize_t slot = (Py_ssize_t)(hash & (uint64_t)(texts->slots - 1));; slot = (slot + 1) & (texts->slots - 1)) {
        int64_t known = texts->table[slot];
        if (known < 0) break;
        if (texts->hash[known] == hash && texts->length[known] == length && memcmp(texts->text[known], text, length) == 0)
            return known;
    }
    if (texts_grow(texts) < 0) {
        texts->failed = 1;
        return -1;
    }
    Py_ssize_t slot = (Py_ssize_t)(hash & (uint64_t)(texts->slots - 1));
    while (texts->table[slot] >= 0) slot = (slot + 1) & (texts->slots - 1);
    int64_t code = texts->n++;
    texts->table[slot] = code;
    texts->hash[code] = hash;
    texts->text[code] = text;
    texts->length[code] = length;
    *added = 1;
    return code;
}

/* distinct(buffer, start, end, views, at) -> (code, first): code (int64 per entry of at) numbers the
   distinct line texts in first-seen order; first (int64 per text) is the position in at where each
   text is first seen. A line number outside the lines counts as one more text, the empty line's. */
static PyObject *distinct(PyObject *self, PyObject *args) {
    Lines lines;
    if (get_lines(args, &lines) < 0) return NULL;
    Py_ssize_t n = lines.n_at;
    Texts texts;
    PyObject *codes = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    int64_t *first = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!codes || !first || texts_init(&texts) < 0) {
        Py_XDECREF(codes);
        free(first);
        release_lines(&lines);
        return PyErr_NoMemory();
    }
    int64_t *code = (int64_t *)PyBytes_AS_STRING(codes);
    int64_t recent[256];  /* the last text seen in each recent_slot */
    for (int k = 0; k < 256; k++) recent[k] = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        const char *text = "";
        uint32_t length = 0;
        int added;
        line_bytes(&lines, lines.index[r], &text, &length);
        unsigned slot = recent_slot(text, length);
        int64_t known = recent[slot];
        if (known >= 0 && texts.length[known] == length && memcmp(texts.text[known], text, length) == 0) {
            code[r] = known;
            continue;
        }
        code[r] = texts_code(&texts, text, length, &added);
        if (code[r] < 0) break;
        recent[slot] = code[r];
        if (added) first[code[r]] = r;
    }
    Py_END_ALLOW_THREADS
    int failed = texts.failed;
    PyObject *firsts = failed ? NULL : int64_bytes(first, texts.n);
    texts_free(&texts);
    free(first);
    release_lines(&lines);
    if (!firsts) {
        Py_DECREF(codes);
        return failed ? PyErr_NoMemory() : NULL;
    }
    return Py_BuildValue("(NN)", codes, firsts);
}

/* header_codes(buffer, start, end, views, kind, role, n_entries, heads, groups, special)
   -> (first, line, group): the header lines that repeat (see mysql_slowlog.LINE_GROUPS) put in
   groups, their texts numbered in first-seen order, and for every group and entry (numbered by
   the role bit 3 entry starts, as mark() does) the number of the entry's first line of the group.
   A line is in a group when it is a header line (ATTR, ATTR_START, not statement text) whose first
   four bytes are heads[i] (uint32; its group groups[i], int8), or by special = (user_host, use,
   set) groups: a User@Host line, or a Time line with "User@Host:" in it; a "use" that is
   metadata; a SET timestamp that is metadata (role bits of mark()).
   first: int32[n_groups * n_entries], group-major, the number of texts where the entry has no line
   of the group (a row past the texts: a table of them with a last empty row gathers without nulls);
   line: int64 per text, the line where it is first seen; group: int8 per text. */
static PyObject *header_codes(PyObject *self, PyObject *args) {
    Py_buffer data = {0}, views = {0}, kinds = {0}, roles = {0}, heads = {0}, groups = {0};
    Py_ssize_t start, end, n_entries;
    int user_host_group, use_group, set_group;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*nny*y*y*ny*y*(iii)", &data, &start, &end, &views, &kinds, &roles,
                          &n_entries, &heads, &groups, &user_host_group, &use_group, &set_group))
        return NULL;
    Py_ssize_t n = kinds.len, n_heads = heads.len / 4, n_groups = 0;
    for (Py_ssize_t i = 0; i < groups.len; i++)
        if (((const int8_t *)groups.buf)[i] + 1 > n_groups) n_groups = ((const int8_t *)groups.buf)[i] + 1;
    int special[3] = {user_host_group, use_group, set_group}, special_ok = 1;
    for (int s = 0; s < 3; s++) {  /* each checked before any sum: INT_MAX + 1 would wrap */
        special_ok &= special[s] >= 0 && special[s] <= 126;
        if (special_ok && special[s] + 1 > n_groups) n_groups = special[s] + 1;
    }
    /* first has n_groups * n_entries int32 (n_groups <= 127): a bigger n_entries would wrap that size */
    if (start < 0 || end < start || end > data.len || views.len != 16 * n || roles.len != n
        || heads.len != 4 * groups.len || n_entries < 0 || n_entries > PY_SSIZE_T_MAX / (4 * 128) || !special_ok
        || n_groups > 127) {
        PyErr_SetString(PyExc_ValueError, "header_codes: inconsistent arguments");
        goto done;
    }
    const uint8_t *role = roles.buf;
    Py_ssize_t n_starts = 0;
    for (Py_ssize_t i = 0; i < n; i++) n_starts += (role[i] >> 3) & 1;
    if (n_starts >= n_entries) {
        PyErr_SetString(PyExc_ValueError, "header_codes: more entry starts than entries");
        goto done;
    }
    Lines lines = {.piece = (const char *)data.buf + start, .piece_length = end - start, .view = views.buf, .n_lines = n};
    PyObject *firsts = PyBytes_FromStringAndSize(NULL, n_groups * n_entries * (Py_ssize_t)sizeof(int32_t));
    int64_t *line_of = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    int8_t *group_of = malloc((size_t)(n ? n : 1));
    Texts texts;
    if (!firsts || !line_of || !group_of || texts_init(&texts) < 0) {
        Py_XDECREF(firsts);
        free(line_of);
        free(group_of);
        PyErr_NoMemory();
        goto done;
    }
    int32_t *first = (int32_t *)PyBytes_AS_STRING(firsts);
    const uint8_t *kind = kinds.buf;
    const uint32_t *head = heads.buf;
    const int8_t *head_group = groups.buf;
    int64_t last[128], recent[256];
    for (int g = 0; g < 128; g++) last[g] = -1;
    for (int k = 0; k < 256; k++) recent[k] = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n_groups * n_entries; i++) first[i] = -1;
    Py_ssize_t entry = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t k = kind[i];
        const char *text;
        uint32_t length;
        int group = -1;
        entry += (role[i] >> 3) & 1;
        if (k == ATTR || k == ATTR_START) {
            if (role[i] & 1) continue;
            uint32_t h = lines.view[4 * i + 1];
            for (Py_ssize_t j = 0; j < n_heads; j++)
                if (head[j] == h) {
                    group = head_group[j];
                    break;
                }
        } else if (k == USER_HOST) {
            group = user_host_group;
        } else if (k == TIME) {
            if (line_bytes(&lines, i, &text, &length) && memmem(text, length, "User@Host:", 10)) group = user_host_group;
        } else if (role[i] & 2) {
            group = use_group;
        } else if (role[i] & 4) {
            group = set_group;
        }
        /* group and entry within bounds even if groups or roles change while being read */
        if (group < 0 || group >= n_groups || entry >= n_entries || !line_bytes(&lines, i, &text, &length)) continue;
        int64_t code = last[group];  /* most lines repeat the group's line of the entry before */
        if (code < 0 || texts.length[code] != length || memcmp(texts.text[code], text, length) != 0) {
            unsigned slot = recent_slot(text, length);
            code = recent[slot];
            if (code < 0 || texts.length[code] != length || memcmp(texts.text[code], text, length) != 0) {
                int added;
                code = texts_code(&texts, text, length, &added);
                if (code < 0) break;
                if (added) {
                    line_of[code] = i;
                    group_of[code] = (int8_t)group;
                }
                recent[slot] = code;
            }
            last[group] = code;
        }
        int32_t *slot = first + (Py_ssize_t)group * n_entries + entry;
        if (*slot < 0) *slot = (int32_t)code;
    }
    for (Py_ssize_t i = 0; i < n_groups * n_entries; i++)
        if (first[i] < 0) first[i] = (int32_t)texts.n;
    Py_END_ALLOW_THREADS
    if (texts.failed) {
        Py_DECREF(firsts);
        PyErr_NoMemory();
    } else {
        result = Py_BuildValue("(NNN)", firsts, int64_bytes(line_of, texts.n),
                               PyBytes_FromStringAndSize((const char *)group_of, texts.n));
    }
    texts_free(&texts);
    free(line_of);
    free(group_of);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&views);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&roles);
    PyBuffer_Release(&heads);
    PyBuffer_Release(&groups);
    return result;
}

/* sequences(owner, code, n_entries) -> (plan, first): rows (owner: int64 entry of each row, rows of
   an entry together; code: int64 per row) grouped per entry, and the entries' sequences of codes
   numbered in first-seen order. plan: int64 per entry, -1 for entries without rows; first: int64
   per sequence, the first entry that has it. */
static PyObject *sequences(PyObject *self, PyObject *args) {
    Py_buffer owners = {0}, codes = {0};
    Py_ssize_t n_entries;
    if (!PyArg_ParseTuple(args, "y*y*n", &owners, &codes, &n_entries)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = owners.len / 8;
    const int64_t *owner = owners.buf, *code = codes.buf;
    int ordered = owners.len % 8 == 0 && codes.len == owners.len && n_entries >= 0
                  && n_entries <= PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(int64_t);  /* the size of plan must not wrap */
    for (Py_ssize_t r = 0; ordered && r < n; r++)
        ordered = owner[r] >= 0 && owner[r] < n_entries && (r == 0 || owner[r] >= owner[r - 1]);
    if (!ordered) {
        PyErr_SetString(PyExc_ValueError, "sequences: owners must be entry numbers in order");
        goto done;
    }
    PyObject *plans = PyBytes_FromStringAndSize(NULL, n_entries * (Py_ssize_t)sizeof(int64_t));
    int64_t *first = malloc((size_t)(n_entries ? n_entries : 1) * sizeof(int64_t));
    Texts texts;
    if (!plans || !first || texts_init(&texts) < 0) {
        Py_XDECREF(plans);
        free(first);
        PyErr_NoMemory();
        goto done;
    }
    int64_t *plan = (int64_t *)PyBytes_AS_STRING(plans);
    int too_long = 0, changed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t e = 0; e < n_entries; e++) plan[e] = -1;
    for (Py_ssize_t r = 0; r < n;) {
        Py_ssize_t stop = r;
        int64_t entry = owner[r];  /* read once: checked again, the owners may have changed since */
        while (stop < n && owner[stop] == entry) stop++;
        if (stop - r > (Py_ssize_t)(UINT32_MAX / 8)) {  /* compared as one byte string of 32-bit length */
            too_long = 1;
            break;
        }
        if (entry < 0 || entry >= n_entries || texts.n >= n_entries) {  /* texts.n: first has n_entries slots */
            changed = 1;
            break;
        }
        /* a sequence of codes is compared as the bytes of its int64 values */
        int added;
        int64_t number = texts_code(&texts, (const char *)(code + r), (uint32_t)((stop - r) * 8), &added);
        if (number < 0) break;
        if (added) first[number] = entry;
        plan[entry] = number;
        r = stop;
    }
    Py_END_ALLOW_THREADS
    if (texts.failed || too_long || changed) {
        Py_DECREF(plans);
        if (too_long) PyErr_SetString(PyExc_ValueError, "sequences: more than 2**29 rows in one entry");
        else if (changed) PyErr_SetString(PyExc_ValueError, "sequences: the owners changed while being read");
        else PyErr_NoMemory();
    } else {
        result = Py_BuildValue("(NN)", plans, int64_bytes(first, texts.n));
    }
    texts_free(&texts);
    free(first);
done:
    PyBuffer_Release(&owners);
    PyBuffer_Release(&codes);
    return result;
}

/* A decimal number "digits[.digits]" at *at, up to a space or the end; 0 unless its value is exact
   in a double after one correctly rounded division (what any correct string-to-double gives). */
static int read_decimal(const char **at, const char *stop, double *value) {
    static const double tens[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = *at;
    uint64_t mantissa = 0;  /* wraps past 19 digits: such numbers are refused below */
    int digits = 0, fraction = 0;
    for (; p < stop && (unsigned)(*p - '0') < 10; p++, digits++) mantissa = mantissa * 10 + (uint64_t)(*p - '0');
    if (!digits) return 0;
    if (p < stop && *p == '.') {
        for (p++; p < stop && (unsigned)(*p - '0') < 10; p++, fraction++) mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        if (!fraction) return 0;
    }
    if ((p < stop && *p != ' ') || digits + fraction > 18 || mantissa > (1ULL << 53)) return 0;
    *value = (double)mantissa / tens[fraction];  /* both exact: one correctly rounded division */
    *at = p;
    return 1;
}

static int read_integer(const char **at, const char *stop, int64_t *value) {
    const char *p = *at;
    int64_t number = 0;
    int digits = 0;
    for (; p < stop && (unsigned)(*p - '0') < 10 && digits < 18; p++, digits++) number = number * 10 + (*p - '0');
    if (!digits || (p < stop && *p != ' ')) return 0;
    *value = number;
    *at = p;
    return 1;
}

/* "key" then one or more spaces, or the end of the line when last */
static int read_key(const char **at, const char *stop, const char *key) {
    size_t n = strlen(key);
    if ((size_t)(stop - *at) < n || memcmp(*at, key, n) != 0) return 0;
    *at += n;
    return 1;
}

static int read_gap(const char **at, const char *stop) {
    const char *p = *at;
    while (p < stop && *p == ' ') p++;
    if (p == *at) return 0;
    *at = p;
    return 1;
}

/* query_times(buffer, start, end, views, at) -> (regular, query_time, lock_time, rows_sent, rows_examined)
   for the "# Query_time: N +Lock_time: N +Rows_sent: N +Rows_examined: N" lines at the line numbers
   in at, with nothing after the last number: regular (uint8) says the line is one of those, the
   others are float64 and int64 arrays (0 where not regular: such lines are read by the caller). */
static PyObject *query_times(PyObject *self, PyObject *args) {
    Lines lines;
    if (get_lines(args, &lines) < 0) return NULL;
    Py_ssize_t n = lines.n_at;
    PyObject *out[5] = {
        PyBytes_FromStringAndSize(NULL, n), PyBytes_FromStringAndSize(NULL, n * 8), PyBytes_FromStringAndSize(NULL, n * 8),
        PyBytes_FromStringAndSize(NULL, n * 8), PyBytes_FromStringAndSize(NULL, n * 8),
    };
    for (int k = 0; k < 5; k++) {
        if (!out[k]) {
            for (int j = 0; j < 5; j++) Py_XDECREF(out[j]);
            release_lines(&lines);
            return NULL;
        }
    }
    uint8_t *regular = (uint8_t *)PyBytes_AS_STRING(out[0]);
    double *query_time = (double *)PyBytes_AS_STRING(out[1]), *lock_time = (double *)PyBytes_AS_STRING(out[2]);
    int64_t *sent = (int64_t *)PyBytes_AS_STRING(out[3]), *examined = (int64_t *)PyBytes_AS_STRING(out[4]);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        const char *text;
        uint32_t length;
        query_time[r] = lock_time[r] = 0;
        sent[r] = examined[r] = 0;
        regular[r] = 0;
        if (!line_bytes(&lines, lines.index[r], &text, &length)) continue;
        const char *at = text, *stop = text + length;
        regular[r] = read_key(&at, stop, "# Query_time: ") && read_decimal(&at, stop, &query_time[r])
                     && read_gap(&at, stop) && read_key(&at, stop, "Lock_time: ") && read_decimal(&at, stop, &lock_time[r])
                     && read_gap(&at, stop) && read_key(&at, stop, "Rows_sent: ") && read_integer(&at, stop, &sent[r])
                     && read_gap(&at, stop) && read_key(&at, stop, "Rows_examined: ")
                     && read_integer(&at, stop, &examined[r]) && at == stop;
    }
    Py_END_ALLOW_THREADS
    release_lines(&lines);
    return Py_BuildValue("(NNNNN)", out[0], out[1], out[2], out[3], out[4]);
}

/* The bytes of statement line i as it goes into the statement: an "# administrator command:" line
   without its "# " (what mysql_slowlog._sql does); empty when the line cannot be read. */
static void statement_line(const Lines *lines, int64_t i, const uint8_t *kind, const char **text, uint32_t *length) {
    if (!line_bytes(lines, i, text, length)) {
        *text = "";
        *length = 0;
    } else if (kind[i] == ADMIN && *length >= 2) {
        *text += 2;
        *length -= 2;
    }
}

/* statements(buffer, start, end, views, at, kind, owner, n_entries) -> (views, status, text)
   The statement of every entry, as mysql_slowlog._sql reads it: its statement lines (at: int64
   line numbers; owner: int64 entry of each, ascending, < n_entries) joined with "\n", an
   "# administrator command:" line without its "# ", the closing ";" removed.
   views: one 16-byte Arrow string view per entry over text (data buffer 0; zeroed for entries
   without statement lines); status: uint8 per entry, 0 no statement lines, 1 the text ended with
   ";" (removed), 2 it did not (the view holds all of it: the caller strips trailing blanks then
   ";"); text: the bytes of the statements longer than 12 bytes (shorter ones are inline). */
static PyObject *statements(PyObject *self, PyObject *args) {
    Lines lines;
    Py_buffer kinds = {0}, owners = {0};
    Py_ssize_t start, end, n_entries;
    memset(&lines, 0, sizeof lines);
    if (!PyArg_ParseTuple(args, "y*nny*y*y*y*n", &lines.data, &start, &end, &lines.views, &lines.at, &kinds, &owners,
                          &n_entries))
        return NULL;
    PyObject *result = NULL, *views = NULL, *status = NULL, *text = NULL;
    Py_ssize_t n = lines.at.len / 8;
    const int64_t *owner = owners.buf;
    int ordered = start >= 0 && end >= start && end <= lines.data.len && lines.views.len % 16 == 0 && lines.at.len % 8 == 0
                  && owners.len == lines.at.len && kinds.len == lines.views.len / 16 && n_entries >= 0
                  && n_entries <= PY_SSIZE_T_MAX / 16;
    for (Py_ssize_t r = 0; ordered && r < n; r++)
        ordered = owner[r] >= 0 && owner[r] < n_entries && (r == 0 || owner[r] >= owner[r - 1]);
    if (!ordered) {
        PyErr_SetString(PyExc_ValueError, "statements: inconsistent arguments");
        goto done;
    }
    lines.piece = (const char *)lines.data.buf + start;
    lines.piece_length = end - start;
    lines.view = lines.views.buf;
    lines.n_lines = lines.views.len / 16;
    lines.index = lines.at.buf;
    lines.n_at = n;
    const uint8_t *kind = kinds.buf;

    /* first pass: the length of each entry's statement, the bytes of the long ones */
    Py_ssize_t total = 0;
    int too_long = 0, changed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n && !too_long;) {
        Py_ssize_t stop = r, length = 0;
        for (; stop < n && owner[stop] == owner[r] && length <= INT32_MAX; stop++) {  /* no sum can wrap */
            const char *line;
            uint32_t size;
            statement_line(&lines, lines.index[stop], kind, &line, &size);
            length += size + (stop > r);
        }
        if (length > 12) total += length;
        too_long = length > INT32_MAX || total > INT32_MAX;
        r = stop;
    }
    Py_END_ALLOW_THREADS
    if (too_long) {
        PyErr_SetString(PyExc_ValueError, "statements: more than 2 GiB of statement text");
        goto done;
    }
    views = PyBytes_FromStringAndSize(NULL, n_entries * 16);
    status = PyBytes_FromStringAndSize(NULL, n_entries);
    text = PyBytes_FromStringAndSize(NULL, total);
    if (!views || !status || !text) goto done;
    uint32_t *view = (uint32_t *)PyBytes_AS_STRING(views);
    uint8_t *state = (uint8_t *)PyBytes_AS_STRING(status);
    char *out = PyBytes_AS_STRING(text);
    Py_BEGIN_ALLOW_THREADS
    memset(view, 0, (size_t)n_entries * 16);
    memset(state, 0, (size_t)n_entries);
    Py_ssize_t used = 0;
    for (Py_ssize_t r = 0; r < n;) {
        char inline_bytes[13];
        Py_ssize_t stop = r, length = 0;
        int64_t entry = owner[r];  /* read once: checked below, the owners may have changed since */
        char *at = out + used;
        for (; stop < n && owner[stop] == entry; stop++) {  /* the joined text: into out, or inline_bytes while short */
            const char *line;
            uint32_t size;
            statement_line(&lines, lines.index[stop], kind, &line, &size);
            Py_ssize_t grown = length + size + (stop > r);
            if (grown > 12 && used + grown > total) {  /* only if kind changed since the first pass */
                changed = 1;
                break;
            }
            if (grown > 12 && length <= 12 && length > 0) memcpy(at, inline_bytes, (size_t)length);  /* spills over */
            char *to = grown > 12 ? at : inline_bytes;
            if (stop > r) to[length++] = '\n';
            memcpy(to + length, line, size);
            length += size;
        }
        if (changed || entry < 0 || entry >= n_entries) {
            changed = 1;
            break;
        }
        const char *joined = length > 12 ? at : inline_bytes;
        int terminated = length > 0 && joined[length - 1] == ';';
        uint32_t *v = view + 16 / 4 * entry;
        uint32_t shown = (uint32_t)(length - terminated);
        v[0] = shown;
        if (shown > 12) {
            memcpy(v + 1, joined, 4);
            v[3] = (uint32_t)used;  /* v[2]: buffer 0 */
        } else {
            memcpy(v + 1, joined, shown);
        }
        if (length > 12) used += length;
        state[entry] = terminated ? 1 : 2;
        r = stop;
    }
    Py_END_ALLOW_THREADS
    if (changed) PyErr_SetString(PyExc_ValueError, "statements: the arguments changed while being read");
    else result = Py_BuildValue("(OOO)", views, status, text);
done:
    Py_XDECREF(views);
    Py_XDECREF(status);
    Py_XDECREF(text);
    release_lines(&lines);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&owners);
    return result;
}

/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF). */
static int valid_utf8(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (!(word & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int more;
        unsigned char low = 0x80, high = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) more = 1;
        else if (c == 0xE0) more = 2, low = 0xA0;
        else if (c == 0xED) more = 2, high = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) more = 2;
        else if (c == 0xF0) more = 3, low = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) more = 3;
        else if (c == 0xF4) more = 3, high = 0x8F;
        else return 0;
        if (n - i <= more) return 0;
        if (s[i + 1] < low || s[i + 1] > high) return 0;
        for (int k = 2; k <= more; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += more + 1;
    }
    return 1;
}

static PyMethodDef methods[] = {
    {"lines", lines, METH_VARARGS,
     "lines(buffer, start, end, cr_mode) -> (views: 16-byte Arrow string views, kind: uint8 per line), None if not UTF-8"},
    {"mark", mark, METH_VARARGS, "mark(kind, views) -> dict of entry numbers, roles and line lists"},
    {"distinct", distinct, METH_VARARGS, "distinct(buffer, start, end, views, at) -> (code int64[len(at)], first int64[d])"},
    {"header_codes", header_codes, METH_VARARGS,
     "header_codes(buffer, start, end, views, kind, role, n_entries, heads, groups, (user_host, use, set))"
     " -> (first int32[groups * n_entries], line int64[d], group int8[d])"},
    {"sequences", sequences, METH_VARARGS, "sequences(owner, code, n_entries) -> (plan int64[n_entries], first int64[p])"},
    {"statements", statements, METH_VARARGS,
     "statements(buffer, start, end, views, at, kind, owner, n_entries) -> (views, status uint8, text): each entry's statement"},
    {"query_times", query_times, METH_VARARGS,
     "query_times(buffer, start, end, views, at) -> (regular, query_time, lock_time, rows_sent, rows_examined)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_line_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__line_scan(void) { return PyModule_Create(&module); }
