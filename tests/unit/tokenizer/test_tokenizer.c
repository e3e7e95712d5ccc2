// tests/unit/tokenizer/test_tokenizer.c: the byte-level BPE tokenizer (CPU).
// Pre-tokenization against GPT-2's pattern on tricky strings (expected splits worked out from the
// pattern's alternatives in order); training against hand-worked merges and against a full
// recount of pair counts per merge; encoding against a plain GPT-2-style merge loop; round trips
// on random bytes, many scripts and tinyshakespeare (TEST_TEXT); the tokenizer file (round
// trip, corrupt and fuzzed files); GPT-2's encoder.json + vocab.bpe, written small here.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/lib/test.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "common/read_file.h"
#include "tokenizer/tokenizer.h"

static const char* tmp_dir;
static char path_buf[4][1024];

// A path in the scratch directory (four live at a time).
static const char* tmp_path(int slot, const char* name) {
    snprintf(path_buf[slot], sizeof path_buf[slot], "%s/%s", tmp_dir, name);
    return path_buf[slot];
}

static int write_bytes(const char* path, const void* data, size_t len) {
    FILE* f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

// Encodes then decodes; checks ids (in range, never <|endoftext|>, at most one per byte) and
// that the bytes come back. Returns 1 when all holds.
static int round_trip(const Tokenizer* t, const unsigned char* text, size_t len, const char* what) {
    int* ids = malloc((len + 1) * sizeof(int));
    unsigned char* back = malloc(len + 1);
    size_t n = tokenizer_encode(t, text, len, ids);
    int ok = n <= len;
    CHECK(n <= len, "%s: %zu ids for %zu bytes", what, n, len);
    for (size_t i = 0; i < n && ok; i++) {
        ok = ids[i] >= 0 && ids[i] < tokenizer_vocab_size(t) && ids[i] != tokenizer_eot(t);
        CHECK(ok, "%s: id %d at %zu out of range or <|endoftext|>", what, ids[i], i);
    }
    if (ok) {
        size_t back_len = tokenizer_decode(t, ids, n, NULL);
        ok = back_len == len && tokenizer_decode(t, ids, n, back) == len && memcmp(back, text, len) == 0;
        CHECK(ok, "%s: decode(encode(x)) != x (%zu bytes back for %zu)", what, back_len, len);
    }
    free(ids);
    free(back);
    return ok;
}

// GPT-2's merge loop, plainly: in each pre-token, repeatedly find the lowest-ranked adjacent
// pair and merge all its occurrences left to right.
static size_t reference_encode(const Tokenizer* t, const unsigned char* text, size_t len, int* out) {
    size_t n_out = 0;
    for (size_t pos = 0; pos < len;) {
        size_t n = pretoken_len(text + pos, len - pos);
        int* w = out + n_out;
        for (size_t i = 0; i < n; i++) w[i] = t->byte_ids[text[pos + i]];
        size_t m = n;
        for (;;) {
            int best = -1;
            for (size_t i = 0; i + 1 < m; i++) {
                int r = tokenizer_pair_rank(t, w[i], w[i + 1]);
                if (r >= 0 && (best < 0 || r < best)) best = r;
            }
            if (best < 0) break;
            BpeMerge mg = t->merges[best];
            size_t o = 0;
            for (size_t i = 0; i < m;) {
                if (i + 1 < m && w[i] == mg.left && w[i + 1] == mg.right) { w[o++] = mg.result; i += 2; }
                else w[o++] = w[i++];
            }
            m = o;
        }
        n_out += m;
        pos += n;
    }
    return n_out;
}

static int same_as_reference(const Tokenizer* t, const unsigned char* text, size_t len, const char* what) {
    int* a = malloc((len + 1) * sizeof(int));
    int* b = malloc((len + 1) * sizeof(int));
    size_t na = tokenizer_encode(t, text, len, a), nb = reference_encode(t, text, len, b);
    int ok = na == nb && memcmp(a, b, na * sizeof(int)) == 0;
    CHECK(ok, "%s: encode gives %zu ids, the plain merge loop %zu (or different ids)", what, na, nb);
    free(a);
    free(b);
    return ok;
}

static int encodes_to(const Tokenizer* t, const char* text, const int* want, size_t n_want) {
    int got[64];
    size_t n = tokenizer_encode(t, (const unsigned char*)text, strlen(text), got);
    int ok = n == n_want && memcmp(got, want, n * sizeof(int)) == 0;
    if (!ok) {
        char s[256] = "";
        for (size_t i = 0; i < n && i < 16; i++) snprintf(s + strlen(s), sizeof s - strlen(s), " %d", got[i]);
        test_fail("encode(\"%s\") gave%s", text, s);
    }
    return ok;
}

// ---------------------------------------------------------------------------------------------
// Corpora made here

static const char* scripts[] = {
    "Hello world's  123!!  \n\n x", "don't I'll we're they've I'm he'd", "Ça a été très éloigné, naïve café.",
    "Καλημέρα κόσμε, ΑΒΓ αβγ", "Привет, мир! Съешь же ещё этих булок.", "你好，世界。日本語のテキストです。",
    "مرحبا بالعالم", "שלום עולם", "😀👍🏽 emoji 🎉🇫🇷 family 👨‍👩‍👧", "٣٤٥ ४५६ ๑๒๓ 十二 Ⅻ ½",
    "tabs\tand\r\nCRLF\r\n", "   leading", "trailing   ", "\u3000ideo\u00a0nbsp\u2028line", "'S 'LL 'sa 's",
    "  \t  \n x", "x\x1c\x1d sep", "Ελληνικά, Русский, 한국어, हिन्दी, ไทย, ქართული",
};
#define N_SCRIPTS (sizeof scripts / sizeof *scripts)

// Multilingual text and short random runs over a small alphabet, concatenated: n pieces.
static unsigned char* make_corpus(int n_pieces, size_t* len) {
    enum { MAX_RUN = 12 };
    size_t longest = MAX_RUN, n = 0;
    for (size_t k = 0; k < N_SCRIPTS; k++)
        if (strlen(scripts[k]) > longest) longest = strlen(scripts[k]);
    unsigned char* c = malloc(longest * (size_t)n_pieces);
    static const char alphabet[] = " \n\t'abcsé1.";
    for (int i = 0; i < n_pieces; i++) {
        if (rng_next() % 3) {
            const char* s = scripts[rng_next() % N_SCRIPTS];
            size_t l = strlen(s);
            memcpy(c + n, s, l);
            n += l;
        } else {
            int l = (int)(rng_next() % MAX_RUN) + 1;
            for (int k = 0; k < l; k++) c[n++] = (unsigned char)alphabet[rng_next() % (sizeof alphabet - 1)];
        }
    }
    *len = n;
    return c;
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenization

// Splits text and compares with the expected pieces (NULL-terminated).
static void check_split(const char* text, const char* const* want) {
    size_t n = strlen(text);
    size_t pos = 0;
    int k = 0;
    while (pos < n) {
        size_t l = pretoken_len((const unsigned char*)text + pos, n - pos);
        if (l == 0 || l > n - pos) {
            test_fail("split of \"%s\": piece of %zu bytes at %zu", text, l, pos);
            return;
        }
        if (!want[k] || strlen(want[k]) != l || memcmp(want[k], text + pos, l) != 0) {
            test_fail("split of \"%s\": piece %d is \"%.*s\", expected \"%s\"", text, k, (int)l, text + pos,
                      want[k] ? want[k] : "(nothing)");
            return;
        }
        pos += l;
        k++;
    }
    CHECK(!want[k], "split of \"%s\": missing piece \"%s\"", text, want[k]);
}

static void test_pretokenize_splits(void) {
    test_begin("pretokenize_gpt2_splits");
    // ' ?\p{L}+' etc. take one leading ' '; a space run before a word gives up its last space;
    // a space run at the end stays whole; a lone \t or \n before a word stands alone.
    check_split("Hello world's  123!!  \n\n x",
                (const char* []){"Hello", " world", "'s", " ", " 123", "!!", "  \n\n", " x", NULL});
    check_split("don't", (const char* []){"don", "'t", NULL});
    check_split("I'll we're they've I'm he'd she's",
                (const char* []){"I", "'ll", " we", "'re", " they", "'ve", " I", "'m", " he", "'d", " she", "'s", NULL});
    check_split("trailing   ", (const char* []){"trailing", "   ", NULL});
    check_split("a   b", (const char* []){"a", "  ", " b", NULL});
    check_split("  ", (const char* []){"  ", NULL});
    check_split("x  \n", (const char* []){"x", "  \n", NULL});
    check_split("\t\tx", (const char* []){"\t", "\t", "x", NULL});
    check_split("a\r\nb", (const char* []){"a", "\r", "\n", "b", NULL});
    // Contractions are lower case only and need no word boundary; punctuation runs swallow '.
    check_split("'S 'sa", (const char* []){"'", "S", " '", "sa", NULL});
    check_split("don'T", (const char* []){"don", "'", "T", NULL});
    check_split("it's'", (const char* []){"it", "'s", "'", NULL});
    check_split("!!'s", (const char* []){"!!'", "s", NULL});
    check_split(" 's", (const char* []){" '", "s", NULL});
    check_split(" !!", (const char* []){" !!", NULL});
    check_split("? ?", (const char* []){"?", " ?", NULL});
    check_split("12ab 3.14", (const char* []){"12", "ab", " 3", ".", "14", NULL});
    // Unicode classes: letters, numbers in other scripts, symbols, white space other than ' '.
    check_split("héllo wörld", (const char* []){"héllo", " wörld", NULL});
    check_split("日本語テキスト", (const char* []){"日本語テキスト", NULL});
    check_split("你好，世界", (const char* []){"你好", "，", "世界", NULL});
    check_split("٣٤٥ ४५६", (const char* []){"٣٤٥", " ४५६", NULL});
    check_split("😀👍 ok", (const char* []){"😀👍", " ok", NULL});
    check_split("a\u00a0b", (const char* []){"a", "\u00a0", "b", NULL});
    check_split("x \u3000y", (const char* []){"x", " ", "\u3000", "y", NULL});
    // U+001C..U+001F are not White_Space (str.isspace() says otherwise; GPT-2's regex does not).
    check_split("a\x1c\x1d" "b", (const char* []){"a", "\x1c\x1d", "b", NULL});
    check_split("", (const char* []){NULL});
    test_end();
}

static void test_pretokenize_invalid_utf8(void) {
    test_begin("pretokenize_invalid_utf8");
    // Each invalid byte is a character of its own, neither letter, number nor space.
    check_split("a\xff\xfe" "b", (const char* []){"a", "\xff\xfe", "b", NULL});
    check_split(" \x80x", (const char* []){" \x80", "x", NULL});
    check_split("\xe2\x82!", (const char* []){"\xe2\x82!", NULL});          // truncated sequence
    check_split("ab\xc3", (const char* []){"ab", "\xc3", NULL});             // cut at the end
    check_split("\xc0\xaf" "a", (const char* []){"\xc0\xaf", "a", NULL});    // overlong '/'
    check_split("b\xe0\x81\x81" "c", (const char* []){"b", "\xe0\x81\x81", "c", NULL});   // overlong 'A'
    check_split("b\xf0\x80\x81\x81" "c", (const char* []){"b", "\xf0\x80\x81\x81", "c", NULL});
    check_split("\xed\xa0\x80" "a", (const char* []){"\xed\xa0\x80", "a", NULL});   // surrogate
    check_split("\xf4\x90\x80\x80" "1", (const char* []){"\xf4\x90\x80\x80", "1", NULL});  // > U+10FFFF
    test_end();
}

// ---------------------------------------------------------------------------------------------
// Training

// Compares the merges; reports the first few that differ.
static void check_merges(const Tokenizer* t, const BpeMerge* want, int n_want) {
    CHECK(t->n_merges == n_want, "%d merges, expected %d", t->n_merges, n_want);
    int reported = 0;
    for (int r = 0; r < n_want && r < t->n_merges && reported < 4; r++) {
        BpeMerge m = t->merges[r];
        if (m.left == want[r].left && m.right == want[r].right && m.result == want[r].result) continue;
        test_fail("merge %d is (%d, %d) -> %d, expected (%d, %d) -> %d", r, m.left, m.right, m.result,
                  want[r].left, want[r].right, want[r].result);
        reported++;
    }
}

static void test_train_known_merges(void) {
    test_begin("train_known_merges_aaabdaaabac");
    // One word. Pair counts: aa 4, ab 2, others 1 -> aa. "aaa" merges left first: Z a b d Z a b a c;
    // Za and ab tie at 2 and ties go to the smaller (left, right): ab (97, 98). Then (Z, ab).
    const char* text = "aaabdaaabac";
    Tokenizer* t = tokenizer_train((const unsigned char*)text, strlen(text), 260, 0);
    CHECK(t != NULL, "training failed");
    if (t) {
        check_merges(t, (BpeMerge[]){{'a', 'a', 256}, {'a', 'b', 257}, {256, 257, 258}}, 3);
        CHECK(tokenizer_vocab_size(t) == 260 && tokenizer_eot(t) == 259, "vocab %d eot %d, expected 260 and 259",
              tokenizer_vocab_size(t), tokenizer_eot(t));
        size_t len;
        const unsigned char* tok = tokenizer_token(t, 258, &len);
        CHECK(tok && len == 4 && memcmp(tok, "aaab", 4) == 0, "token 258 is not \"aaab\"");
        encodes_to(t, text, (int[]){258, 'd', 258, 'a', 'c'}, 5);
        encodes_to(t, "aaaa", (int[]){256, 256}, 2);
        tokenizer_free(t);
    }
    test_end();

    test_begin("train_known_merges_words");
    // Words "ab" x1 and " ab" x2: (a, b) 3 beats (' ', a) 2; then (' ', ab) 2.
    const char* words = "ab ab ab";
    t = tokenizer_train((const unsigned char*)words, strlen(words), 259, 0);
    CHECK(t != NULL, "training failed");
    if (t) {
        check_merges(t, (BpeMerge[]){{'a', 'b', 256}, {' ', 256, 257}}, 2);
        encodes_to(t, "ab ab", (int[]){256, 257}, 2);
        encodes_to(t, "b a", (int[]){'b', ' ', 'a'}, 3);
        tokenizer_free(t);
    }
    // Back-to-back occurrences: "aaaa" x1, " aaaa" x1. (a, a) counts 6 -> Z Z and ' ' Z Z;
    // then (Z, Z) 2 beats (' ', Z) 1; then (' ', ZZ).
    const char* runs = "aaaa aaaa";
    t = tokenizer_train((const unsigned char*)runs, strlen(runs), 260, 0);
    CHECK(t != NULL, "training failed");
    if (t) {
        check_merges(t, (BpeMerge[]){{'a', 'a', 256}, {256, 256, 257}, {' ', 257, 258}}, 3);
        encodes_to(t, "aaaaa aaaa", (int[]){257, 'a', 258}, 3);
        tokenizer_free(t);
    }
    test_end();
}

static void test_train_limits(void) {
    test_begin("train_stops_when_no_pairs_left");
    const char* text = "aaabdaaabac";
    Tokenizer* t = tokenizer_train((const unsigned char*)text, strlen(text), 300, 0);
    CHECK(t != NULL, "training failed");
    if (t) {
        // aa, ab, (aa, ab), ac, (d, aaab), (aaab, daaab), (aaabdaaab, ac): then one token is left.
        CHECK(tokenizer_vocab_size(t) == 264 && t->n_merges == 7, "vocab %d with %d merges, expected 264 and 7",
              tokenizer_vocab_size(t), t->n_merges);
        encodes_to(t, text, (int[]){262}, 1);
        tokenizer_free(t);
    }
    t = tokenizer_train((const unsigned char*)"", 0, 1000, 0);
    CHECK(t && tokenizer_vocab_size(t) == 257 && tokenizer_eot(t) == 256, "empty text: not just bytes + eot");
    tokenizer_free(t);
    CHECK(tokenizer_train((const unsigned char*)text, strlen(text), 256, 0) == NULL, "vocab 256 accepted");
    CHECK(tokenizer_train((const unsigned char*)text, strlen(text), -5, 0) == NULL, "vocab -5 accepted");
    test_end();
}

// Training by a full recount of every pair in every word at each step, ties to the smaller pair.
static void reference_train(const unsigned char* text, size_t len, int n_merges, BpeMerge* out, int* n_out) {
    int V = 256 + n_merges;
    int64_t* count = malloc((size_t)V * V * sizeof(int64_t));
    int* sym = malloc(len * sizeof(int));
    size_t* piece_start = malloc((len + 1) * sizeof(size_t));
    size_t* piece_len = malloc((len + 1) * sizeof(size_t));
    size_t n_pieces = 0;
    for (size_t pos = 0; pos < len; n_pieces++) {
        size_t l = pretoken_len(text + pos, len - pos);
        piece_start[n_pieces] = pos;
        piece_len[n_pieces] = l;
        for (size_t i = 0; i < l; i++) sym[pos + i] = text[pos + i];
        pos += l;
    }
    *n_out = 0;
    for (int step = 0; step < n_merges; step++) {
        memset(count, 0, (size_t)V * V * sizeof(int64_t));
        for (size_t p = 0; p < n_pieces; p++)
            for (size_t i = 0; i + 1 < piece_len[p]; i++)
                count[(size_t)sym[piece_start[p] + i] * V + sym[piece_start[p] + i + 1]]++;
        size_t best = 0;
        for (size_t k = 1; k < (size_t)V * V; k++)
            if (count[k] > count[best]) best = k;
        if (count[best] == 0) break;
        int left = (int)(best / V), right = (int)(best % V), z = 256 + step;
        out[(*n_out)++] = (BpeMerge){left, right, z};
        for (size_t p = 0; p < n_pieces; p++) {
            int* s = sym + piece_start[p];
            size_t o = 0;
            for (size_t i = 0; i < piece_len[p];) {
                if (i + 1 < piece_len[p] && s[i] == left && s[i + 1] == right) { s[o++] = z; i += 2; }
                else s[o++] = s[i++];
            }
            piece_len[p] = o;
        }
    }
    free(count);
    free(sym);
    free(piece_start);
    free(piece_len);
}

static void test_train_matches_recount(void) {
    test_begin("train_matches_full_recount");
    size_t len;
    unsigned char* corpus = make_corpus(600, &len);
    const int n_merges = 300;
    BpeMerge* want = malloc(n_merges * sizeof(BpeMerge));
    int n_want;
    reference_train(corpus, len, n_merges, want, &n_want);
    Tokenizer* t = tokenizer_train(corpus, len, 257 + n_merges, 0);
    CHECK(t != NULL, "training failed");
    CHECK(n_want == n_merges, "the corpus ran out of pairs (%d merges): make it larger", n_want);
    if (t) {
        check_merges(t, want, n_want);
        same_as_reference(t, corpus, len, "corpus");
        round_trip(t, corpus, len, "corpus");
        tokenizer_free(t);
    }
    free(want);
    free(corpus);
    test_end();
}

// ---------------------------------------------------------------------------------------------
// Round trips

static Tokenizer* corpus_tokenizer(void) {
    size_t len;
    unsigned char* corpus = make_corpus(2000, &len);
    Tokenizer* t = tokenizer_train(corpus, len, 1200, 0);
    free(corpus);
    return t;
}

static void test_round_trip_random(const Tokenizer* t) {
    test_begin("round_trip_random_bytes");
    unsigned char* buf = malloc(1 << 16);
    static const char alphabet[] = " \n\t'sabc\xc3\xa9\xe4\xb8\x80";
    int ok = 1;
    for (size_t len = 0; len <= (1 << 16) && ok; len = len < 300 ? len + 1 : len * 4) {
        for (int kind = 0; kind < 2 && ok; kind++) {   // uniform bytes; a small alphabet (long runs)
            for (size_t i = 0; i < len; i++)
                buf[i] = kind == 0 ? (unsigned char)rng_next() : (unsigned char)alphabet[rng_next() % (sizeof alphabet - 1)];
            char what[64];
            snprintf(what, sizeof what, "%s bytes, length %zu", kind ? "alphabet" : "random", len);
            ok = round_trip(t, buf, len, what) && same_as_reference(t, buf, len, what);
        }
    }
    // A single pre-token far longer than any cached one: 65536 spaces.
    memset(buf, ' ', 1 << 16);
    round_trip(t, buf, 1 << 16, "65536 spaces");
    free(buf);
    test_end();
}

static void test_round_trip_scripts(const Tokenizer* t) {
    test_begin("round_trip_scripts");
    for (size_t i = 0; i < N_SCRIPTS; i++)
        round_trip(t, (const unsigned char*)scripts[i], strlen(scripts[i]), scripts[i]);
    size_t len;
    unsigned char* corpus = make_corpus(500, &len);
    round_trip(t, corpus, len, "mixed corpus");
    same_as_reference(t, corpus, len, "mixed corpus");
    free(corpus);
    test_end();
}

static void test_round_trip_shakespeare(void) {
    const char* name = "round_trip_tinyshakespeare";
    const char* path = test_env("FLASHGPT_TEXT", "build/texts/tinyshakespeare.txt");
    size_t len;
    unsigned char* text = test_text(name, &len);
    if (!text) return;
    test_begin(name);
    Tokenizer* t = tokenizer_train(text, len, 4096, 0);
    CHECK(t && tokenizer_vocab_size(t) == 4096, "training 4096 ids failed");
    if (t) {
        round_trip(t, text, len, path);
        same_as_reference(t, text, len, path);
        int* ids = malloc(len * sizeof(int));
        size_t n = tokenizer_encode(t, text, len, ids);
        CHECK(len > 3 * n, "only %.2f bytes per token on English text", (double)len / n);
        free(ids);
        tokenizer_free(t);
    }
    free(text);
    test_end();
}

static void test_eot(const Tokenizer* t) {
    test_begin("eot_special_token");
    int eot = tokenizer_eot(t);
    CHECK(eot == tokenizer_vocab_size(t) - 1, "eot %d is not the last id", eot);
    const char* text = "a<|endoftext|>b<|endoftext|>";
    round_trip(t, (const unsigned char*)text, strlen(text), "text holding <|endoftext|>");
    int ids[3] = {'x', eot, 'y'};
    unsigned char out[64];
    size_t n = tokenizer_decode(t, ids, 3, out);
    CHECK(n == 15 && memcmp(out, "x<|endoftext|>y", 15) == 0, "decode of x, eot, y gives \"%.*s\"", (int)n, out);
    int bad[4] = {-1, 'q', tokenizer_vocab_size(t), 1 << 30};
    n = tokenizer_decode(t, bad, 4, out);
    CHECK(n == 1 && out[0] == 'q', "ids outside the vocabulary decode to something");
    size_t len;
    CHECK(tokenizer_token(t, -1, &len) == NULL && tokenizer_token(t, tokenizer_vocab_size(t), &len) == NULL,
          "tokenizer_token of an id outside the vocabulary is not NULL");
    CHECK(tokenizer_encode(t, (const unsigned char*)"", 0, ids) == 0, "empty text gives ids");
    test_end();
}

// ---------------------------------------------------------------------------------------------
// The tokenizer file

static int same_tokenizer(const Tokenizer* a, const Tokenizer* b) {
    if (tokenizer_vocab_size(a) != tokenizer_vocab_size(b) || tokenizer_eot(a) != tokenizer_eot(b) ||
        a->n_merges != b->n_merges) return 0;
    for (int id = 0; id < tokenizer_vocab_size(a); id++) {
        size_t la, lb;
        const unsigned char* ta = tokenizer_token(a, id, &la);
        const unsigned char* tb = tokenizer_token(b, id, &lb);
        if (la != lb || memcmp(ta, tb, la) != 0) return 0;
    }
    return memcmp(a->merges, b->merges, a->n_merges * sizeof(BpeMerge)) == 0;
}

static void test_save_load(const Tokenizer* t) {
    test_begin("save_load_round_trip");
    char err[ERR_LEN] = "";
    const char* path = tmp_path(0, "tok_roundtrip.tok");
    CHECK(tokenizer_save(t, path, err) == 0, "save failed: %s", err);
    Tokenizer* back = tokenizer_load(path, err);
    CHECK(back != NULL, "load failed: %s", err);
    if (back) {
        CHECK(same_tokenizer(t, back), "the loaded tokenizer differs");
        CHECK(tokenizer_fingerprint(t) == tokenizer_fingerprint(back),
              "the fingerprint changed through save and load");
        Tokenizer* other = tokenizer_train((const unsigned char*)"abababab cdcd", 13, 258, 0);
        CHECK(other && tokenizer_fingerprint(other) != tokenizer_fingerprint(t) &&
              tokenizer_fingerprint(other) != 0, "two tokenizers share a fingerprint");
        tokenizer_free(other);
        size_t len;
        unsigned char* corpus = make_corpus(300, &len);
        int* a = malloc(len * sizeof(int));
        int* b = malloc(len * sizeof(int));
        size_t na = tokenizer_encode(t, corpus, len, a), nb = tokenizer_encode(back, corpus, len, b);
        CHECK(na == nb && memcmp(a, b, na * sizeof(int)) == 0, "the loaded tokenizer encodes differently");
        free(a);
        free(b);
        free(corpus);
        tokenizer_free(back);
    }
    CHECK(tokenizer_save(t, tmp_path(1, "no_such_dir/x.tok"), err) != 0 && strstr(err, "no_such_dir"),
          "save into a missing directory: '%s'", err);
    test_end();
}

// Writes bytes to a scratch file and checks that loading fails with an error that names the
// file and contains want.
static void expect_load_error(const unsigned char* bytes, size_t len, const char* name, const char* want) {
    const char* path = tmp_path(1, name);
    char err[ERR_LEN] = "";
    if (write_bytes(path, bytes, len)) {
        test_fail("cannot write %s", path);
        return;
    }
    Tokenizer* t = tokenizer_load(path, err);
    CHECK(t == NULL, "%s: loaded", name);
    tokenizer_free(t);
    CHECK(strstr(err, path) != NULL, "%s: error does not name the file: '%s'", name, err);
    CHECK(strstr(err, want) != NULL, "%s: error '%s' does not say '%s'", name, err, want);
    CHECK(!strchr(err, '\n'), "%s: error is not one line", name);
}

static void put_i32(unsigned char* p, int32_t v) { memcpy(p, &v, 4); }

static void test_corrupt_files(const Tokenizer* t) {
    test_begin("load_corrupt_files");
    char err[ERR_LEN] = "";
    const char* good_path = tmp_path(0, "tok_good.tok");
    CHECK(tokenizer_save(t, good_path, err) == 0, "save failed: %s", err);
    size_t size;
    unsigned char* good = read_file(good_path, &size, err);
    unsigned char* bad = malloc(size + 16);
    if (!good || !bad) {
        test_fail("cannot read back %s", good_path);
        test_end();
        return;
    }
    int V = tokenizer_vocab_size(t), M = t->n_merges;
    size_t lengths = 32, merges = size - 12 * (size_t)M;   // where the sections start
#define BAD_COPY() memcpy(bad, good, size)
    BAD_COPY(); put_i32(bad, 12345);
    expect_load_error(bad, size, "bad_magic.tok", "not a tokenizer file");
    BAD_COPY(); put_i32(bad + 4, 2);
    expect_load_error(bad, size, "bad_version.tok", "version 2");
    size_t cuts[] = {0, 7, 31, 32, lengths + 4 * (size_t)V / 2, merges - 1, merges + 5, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        char name[64];
        snprintf(name, sizeof name, "truncated_%zu.tok", cuts[i]);
        expect_load_error(good, cuts[i], name, "truncated");
    }
    BAD_COPY(); bad[size] = 0;
    expect_load_error(bad, size + 1, "trailing.tok", "trailing");
    BAD_COPY(); put_i32(bad + 8, 100);
    expect_load_error(bad, size, "vocab_small.tok", "vocabulary size 100");
    BAD_COPY(); put_i32(bad + 8, -7);
    expect_load_error(bad, size, "vocab_negative.tok", "vocabulary size -7");
    BAD_COPY(); put_i32(bad + 12, V + 1);
    expect_load_error(bad, size, "merges_many.tok", "merges for a vocabulary");
    BAD_COPY(); put_i32(bad + 16, V);
    expect_load_error(bad, size, "eot_range.tok", "outside the vocabulary");
    BAD_COPY(); put_i32(bad + 20, -1);
    expect_load_error(bad, size, "bytes_negative.tok", "bad header");
    BAD_COPY(); put_i32(bad + lengths, 0x7FFFFFFF);
    expect_load_error(bad, size, "token_len_huge.tok", "runs past");
    // Token 0 one byte longer, token 1 one shorter: the sizes still add up, but no token is
    // byte 0x00 alone any more.
    BAD_COPY(); put_i32(bad + lengths, 2); put_i32(bad + lengths + 4, 0);
    expect_load_error(bad, size, "token_lengths.tok", "byte 0x00 has no token");
    BAD_COPY(); bad[lengths + 4 * (size_t)V + 1] = 0;   // token 1 is now byte 0 too
    expect_load_error(bad, size, "byte_twice.tok", "byte 0x00 is both token 0 and token 1");
    BAD_COPY(); put_i32(bad + merges, V);
    expect_load_error(bad, size, "merge_left_range.tok", "outside the vocabulary");
    BAD_COPY(); put_i32(bad + merges + 8, -3);
    expect_load_error(bad, size, "merge_result_range.tok", "outside the vocabulary");
    BAD_COPY(); put_i32(bad + merges + 4, t->merges[0].left == 'z' ? 'y' : 'z');
    expect_load_error(bad, size, "merge_bytes.tok", "is not token");
    BAD_COPY(); put_i32(bad + merges + 12 * (size_t)(M - 1), tokenizer_eot(t));
    expect_load_error(bad, size, "merge_eot.tok", "<|endoftext|>");
    BAD_COPY(); memcpy(bad + merges + 12, bad + merges, 12);
    expect_load_error(bad, size, "merge_twice.tok", "both merge");
    char missing_err[ERR_LEN] = "";
    const char* missing = tmp_path(1, "missing.tok");
    remove(missing);
    CHECK(tokenizer_load(missing, missing_err) == NULL && strstr(missing_err, missing),
          "a missing file: '%s'", missing_err);
    CHECK(tokenizer_load(tmp_dir, missing_err) == NULL && strstr(missing_err, tmp_dir),
          "a directory: '%s'", missing_err);
#undef BAD_COPY
    free(good);
    free(bad);
    test_end();
}

static void test_fuzzed_files(const Tokenizer* t) {
    test_begin("load_fuzzed_files");
    char err[ERR_LEN] = "";
    const char* good_path = tmp_path(0, "tok_fuzz_good.tok");
    CHECK(tokenizer_save(t, good_path, err) == 0, "save failed: %s", err);
    size_t size;
    unsigned char* good = read_file(good_path, &size, err);
    if (!good) {
        test_fail("cannot read back %s", good_path);
        test_end();
        return;
    }
    // Flipped bits anywhere: a file either fails to load with an error naming it, or loads as a
    // tokenizer that still round-trips (a flipped byte inside a token's text can stay valid).
    const char* path = tmp_path(1, "fuzzed.tok");
    const char* probe = "Fuzzed tokenizers still round-trip: 123 éé 你好\n";
    int loaded = 0;
    for (int k = 0; k < 300; k++) {
        unsigned char* bad = malloc(size);
        memcpy(bad, good, size);
        size_t at = k < 100 ? rng_next() % 32 : rng_next() % size;   // the header gets its share
        bad[at] ^= (unsigned char)(1u << (rng_next() % 8));
        write_bytes(path, bad, size);
        free(bad);
        err[0] = 0;
        Tokenizer* f = tokenizer_load(path, err);
        if (f) {
            loaded++;
            round_trip(f, (const unsigned char*)probe, strlen(probe), "fuzzed file");
            tokenizer_free(f);
        } else {
            CHECK(strstr(err, path) != NULL, "error does not name the file: '%s'", err);
        }
    }
    CHECK(loaded < 300, "every fuzzed file loaded");
    free(good);
    test_end();
}

// ---------------------------------------------------------------------------------------------
// GPT-2's files

// GPT-2's byte-to-unicode table, written independently of the loader: printable bytes stand
// for themselves, the others in order for U+0100 onwards.
static int gpt2_codepoint(int b) {
    int n = 0;
    for (int c = 0; c < 256; c++) {
        int printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
        if (c == b) return printable ? c : 256 + n;
        if (!printable) n++;
    }
    return -1;
}

// A JSON string for the token text s (bytes): code points >= U+0100 as \u escapes when escape
// is set, raw UTF-8 otherwise.
static void json_key(FILE* f, const unsigned char* s, size_t n, int escape) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        int cp = gpt2_codepoint(s[i]);
        if (cp == '"' || cp == '\\') fprintf(f, "\\%c", cp);
        else if (cp < 0x80) fputc(cp, f);
        else if (escape && cp >= 0x100) fprintf(f, "\\u%04x", cp);
        else fprintf(f, "%c%c", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
    }
    fputc('"', f);
}

// The tiny GPT-2-format vocabulary of these tests: 256 byte tokens under permuted ids, then
//   r0 "Ġ t" -> " t"  256      r1 "h e" -> "he" 257     r2 "Ġt he" -> " the" 258
//   r3 "Ã ©" -> "é"   259      r4 "Ċ Ċ" -> "\n\n" 260   r5 "b c" -> "bc" 261
//   r6 "abc a" -> "abca" 262   r7 "a bc" -> "abc" 263,  and <|endoftext|> 264.
// "abc" is reachable through r7 only after r5, but r6, which uses it, ranks before r7.
#define TINY_V 265
static int tiny_byte_id(int b) { return (b * 7 + 3) % 256; }

static void write_tiny_gpt2(const char* json_path, const char* bpe_path) {
    FILE* f = fopen(json_path, "wb");
    fputs("{", f);
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        json_key(f, &c, 1, b % 2);
        fprintf(f, ": %d, ", tiny_byte_id(b));
        if (b % 16 == 15) fputs("\n ", f);
    }
    const char* merged[] = {" t", "he", " the", "\xc3\xa9", "\n\n", "bc", "abca", "abc"};
    for (int k = 0; k < 8; k++) {
        json_key(f, (const unsigned char*)merged[k], strlen(merged[k]), 1);
        fprintf(f, ":%d,", 256 + k);
    }
    fputs("\"<|endoftext|>\": 264}\n", f);
    fclose(f);
    f = fopen(bpe_path, "wb");
    fputs("#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\n\xc3\x83 \xc2\xa9\n\xc4\x8a \xc4\x8a\nb c\nabc a\na bc\n", f);
    fclose(f);
}

static void test_gpt2_known_ids(void) {
    test_begin("gpt2_format_known_ids");
    const char* json = tmp_path(0, "tiny_encoder.json");
    const char* bpe = tmp_path(1, "tiny_vocab.bpe");
    write_tiny_gpt2(json, bpe);
    char err[ERR_LEN] = "";
    Tokenizer* t = tokenizer_load_gpt2(json, bpe, err);
    CHECK(t != NULL, "load failed: %s", err);
    if (t) {
        CHECK(tokenizer_vocab_size(t) == TINY_V && tokenizer_eot(t) == 264, "vocab %d eot %d, expected %d and 264",
              tokenizer_vocab_size(t), tokenizer_eot(t), TINY_V);
        encodes_to(t, " the", (int[]){258}, 1);
        encodes_to(t, "the", (int[]){tiny_byte_id('t'), 257}, 2);
        encodes_to(t, " then", (int[]){258, tiny_byte_id('n')}, 2);
        encodes_to(t, "\xc3\xa9t\xc3\xa9", (int[]){259, tiny_byte_id('t'), 259}, 3);
        encodes_to(t, "\n\n", (int[]){260}, 1);
        encodes_to(t, "\xff\x80 ", (int[]){tiny_byte_id(0xff), tiny_byte_id(0x80), tiny_byte_id(' ')}, 3);
        // GPT-2 merges every (a, bc) before it looks at (abc, a): abc abc, not abca bc.
        encodes_to(t, "abcabc", (int[]){263, 263}, 2);
        encodes_to(t, "abca", (int[]){262}, 1);
        size_t len;
        const unsigned char* tok = tokenizer_token(t, 259, &len);
        CHECK(tok && len == 2 && memcmp(tok, "\xc3\xa9", 2) == 0, "token 259 is not \"é\"");
        tok = tokenizer_token(t, tiny_byte_id('"'), &len);
        CHECK(tok && len == 1 && tok[0] == '"', "the token of '\"' is wrong");
        tok = tokenizer_token(t, tiny_byte_id(0), &len);
        CHECK(tok && len == 1 && tok[0] == 0, "the token of byte 0 is wrong");
        const char* eot_text = "x<|endoftext|>";
        int ids[32];
        size_t n = tokenizer_encode(t, (const unsigned char*)eot_text, strlen(eot_text), ids);
        for (size_t i = 0; i < n; i++) CHECK(ids[i] != 264, "<|endoftext|> produced from text");
        round_trip(t, (const unsigned char*)"the abcabc \xc3\xa9\n\n\t x\xfe", 19, "tiny GPT-2 vocabulary");

        // The imported tokenizer through the project's file (prepare_data saves it so): the same
        // tokens, merges and ids for any text.
        const char* saved = tmp_path(2, "tiny_gpt2.tok");
        CHECK(tokenizer_save(t, saved, err) == 0, "save failed: %s", err);
        Tokenizer* back = tokenizer_load(saved, err);
        CHECK(back && same_tokenizer(t, back), "saved and loaded GPT-2 vocabulary differs: %s", err);
        if (back) {
            encodes_to(back, "abcabc the", (int[]){263, 263, 258}, 3);
            size_t corpus_len;
            unsigned char* corpus = make_corpus(300, &corpus_len);
            int* a = malloc(corpus_len * sizeof(int));
            int* b = malloc(corpus_len * sizeof(int));
            size_t na = tokenizer_encode(t, corpus, corpus_len, a);
            size_t nb = tokenizer_encode(back, corpus, corpus_len, b);
            CHECK(na < corpus_len, "no merge applies to the corpus");
            CHECK(na == nb && memcmp(a, b, na * sizeof(int)) == 0,
                  "the saved GPT-2 vocabulary encodes differently");
            free(a);
            free(b);
            free(corpus);
        }
        tokenizer_free(back);
        tokenizer_free(t);
    }
    test_end();
}

// Writes encoder.json and vocab.bpe texts and checks the load error names the blamed file and
// says want.
static void expect_gpt2_error(const char* json_text, const char* bpe_text, int blame_json, const char* want) {
    const char* json = tmp_path(0, "bad_encoder.json");
    const char* bpe = tmp_path(1, "bad_vocab.bpe");
    write_bytes(json, json_text, strlen(json_text));
    write_bytes(bpe, bpe_text, strlen(bpe_text));
    char err[ERR_LEN] = "";
    Tokenizer* t = tokenizer_load_gpt2(json, bpe, err);
    CHECK(t == NULL, "loaded (expected '%s')", want);
    tokenizer_free(t);
    CHECK(strstr(err, blame_json ? json : bpe) != NULL, "error does not name %s: '%s'",
          blame_json ? "encoder.json" : "vocab.bpe", err);
    CHECK(strstr(err, want) != NULL, "error '%s' does not say '%s'", err, want);
}

// An encoder.json of the 256 byte tokens (each as a \u escape), "bc": 256, extra (more
// "key": id entries), and <|endoftext|> at id eot (eot < 0: left out). Leaves out the tokens of
// bytes from n_bytes on.
static char* tiny_json(int n_bytes, const char* extra, int eot) {
    size_t cap = 16384, n = 0;
    char* s = malloc(cap);
    n += snprintf(s + n, cap - n, "{");
    for (int b = 0; b < n_bytes; b++)
        n += snprintf(s + n, cap - n, "\"\\u%04x\": %d, ", gpt2_codepoint(b), tiny_byte_id(b));
    n += snprintf(s + n, cap - n, "\"bc\": 256%s%s", *extra ? ", " : "", extra);
    if (eot >= 0) snprintf(s + n, cap - n, ", \"<|endoftext|>\": %d}", eot);
    else snprintf(s + n, cap - n, "}");
    return s;
}

static void test_gpt2_errors(void) {
    test_begin("gpt2_format_errors");
    const char* merges = "#version: 0.2\r\nb c\r\n";
    char* base = tiny_json(256, "", 257);
    {   // the base files load: each error below comes from its one edit
        const char* json = tmp_path(0, "base_encoder.json");
        const char* bpe = tmp_path(1, "base_vocab.bpe");
        write_bytes(json, base, strlen(base));
        write_bytes(bpe, merges, strlen(merges));
        char err[ERR_LEN] = "";
        Tokenizer* t = tokenizer_load_gpt2(json, bpe, err);
        CHECK(t && tokenizer_vocab_size(t) == 258 && tokenizer_eot(t) == 257, "the base files do not load: %s", err);
        if (t) encodes_to(t, "abc", (int[]){tiny_byte_id('a'), 256}, 2);
        tokenizer_free(t);
    }
    char* edited;
    expect_gpt2_error("hello", merges, 1, "expected '{'");
    expect_gpt2_error("{}", merges, 1, "no tokens");
    base[strlen(base) / 2] = 0;
    expect_gpt2_error(base, merges, 1, "byte");   // cut in the middle
    free(base);
    edited = tiny_json(256, "\"zz\": 5", 258);
    expect_gpt2_error(edited, merges, 1, "token id 5 given twice");
    free(edited);
    edited = tiny_json(256, "\"zz\": 900", 257);
    expect_gpt2_error(edited, merges, 1, "token id 900 out of range");
    free(edited);
    edited = tiny_json(256, "\"zz\": 257", -1);
    expect_gpt2_error(edited, merges, 1, "no <|endoftext|> token");
    free(edited);
    edited = tiny_json(255, "\"zz\": 252", 257);   // 252 is byte 0xFF's id
    expect_gpt2_error(edited, merges, 1, "no token for byte 0xFF");
    free(edited);
    edited = tiny_json(256, "\"\\u4e00\": 258", 257);
    expect_gpt2_error(edited, merges, 1, "U+4E00 is not in GPT-2's byte-to-unicode table");
    free(edited);
    edited = tiny_json(256, "\"\\q\": 258", 257);
    expect_gpt2_error(edited, merges, 1, "bad escape");
    free(edited);
    edited = tiny_json(256, "\"zz\": -1", 257);
    expect_gpt2_error(edited, merges, 1, "expected a token id");
    free(edited);
    edited = tiny_json(256, "", 257);
    size_t n = strlen(edited);
    edited = realloc(edited, n + 3);
    memcpy(edited + n, " x", 3);
    expect_gpt2_error(edited, merges, 1, "trailing characters");
    edited[n] = 0;
    expect_gpt2_error(edited, "#version: 0.2\nbc\n", 0, "line 2: expected two tokens");
    expect_gpt2_error(edited, "#version: 0.2\nb  c\n", 0, "line 2: expected two tokens");
    expect_gpt2_error(edited, "#version: 0.2\nb c\nxy z\n", 0, "line 3: token 'xy' is not in the encoder");
    expect_gpt2_error(edited, "#version: 0.2\nx y\n", 0, "line 2: the merge 'x y' makes a token");
    expect_gpt2_error(edited, "#version: 0.2\nb c\nb c\n", 0, "merges 0 and 1 both merge");
    expect_gpt2_error(edited, "#version: 0.2\n\xff c\n", 0, "not valid UTF-8");
    expect_gpt2_error(edited, "#version: 0.2\n\xe4\xb8\x80 c\n", 0, "byte-to-unicode table");
    char err[ERR_LEN] = "";
    const char* json = tmp_path(0, "bad_encoder.json");
    const char* missing = tmp_path(2, "missing_vocab.bpe");
    remove(missing);
    CHECK(tokenizer_load_gpt2(json, missing, err) == NULL && strstr(err, missing), "missing vocab.bpe: '%s'", err);
    const char* missing_json = tmp_path(3, "missing_encoder.json");
    remove(missing_json);
    CHECK(tokenizer_load_gpt2(missing_json, missing, err) == NULL && strstr(err, missing_json),
          "missing encoder.json: '%s'", err);
    free(edited);
    test_end();
}

int main(void) {
    tmp_dir = test_env("FLASHGPT_TMP", "/tmp");
    test_pretokenize_splits();
    test_pretokenize_invalid_utf8();
    test_train_known_merges();
    test_train_limits();
    test_train_matches_recount();
    Tokenizer* t = corpus_tokenizer();
    if (!t) {
        printf("FAIL corpus_tokenizer: training failed\n");
        return 1;
    }
    test_round_trip_random(t);
    test_round_trip_scripts(t);
    test_round_trip_shakespeare();
    test_eot(t);
    test_save_load(t);
    test_corrupt_files(t);
    test_fuzzed_files(t);
    test_gpt2_known_ids();
    test_gpt2_errors();
    tokenizer_free(t);
    return test_exit_code();
}
