// evaluate.cu: multiple-choice evaluation of a trained model, as llm.c's trainer reports
// HellaSwag. Each item of a file in HellaSwag's layout (data/multiple_choice.h) is four rows:
// <|endoftext|>, the context's tokens, then one ending's tokens (" " + the ending, as GPT-2 reads
// a continuation). The model scores an ending by its cross-entropy on the ending's tokens given
// what comes before; the item is answered right when its labelled ending scores lowest:
//   acc       the lowest total cross-entropy over the ending's tokens
//   acc_norm  the lowest mean cross-entropy per token (length-normalised; llm.c's figure)
// Items are scored in batches of rows on the GPU, one forward and the classifier's losses per
// batch. --scores writes every row's numbers and tokens as CSV.
#include <string.h>

#include "common/atomic_file.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/options.h"
#include "common/output_path.h"
#include "data/multiple_choice.h"
#include "gpt/checkpoint.h"
#include "gpt/gpt.h"
#include "gpt/model_files.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char* checkpoint;
    const char* tokenizer;
    const char* hellaswag;
    const char* scores;      // CSV of every row, or NULL
    int batch_items;         // items per forward
    int max_items;           // 0: all
} EvaluateOptions;

static void parse_args(int argc, char** argv, EvaluateOptions* o) {
    *o = (EvaluateOptions){.batch_items = 16};
    const Option options[] = {
        OPTION_CHECKPOINT(o->checkpoint),
        OPTION_MODEL_TOKENIZER(o->tokenizer),
        {OPTION_PATH, "--hellaswag", "FILE", &o->hellaswag, "the items, e.g. hellaswag_val.jsonl", 0, 0, NULL, NULL, NULL,
         1},
        {OPTION_INT, "--batch-items", "N", &o->batch_items, "items scored per forward (4 rows each) [16]", 1, 1 << 16},
        {OPTION_INT, "--max-items", "N", &o->max_items, "only the first N items, 0 for all [0]", 0, 1 << 30},
        {OPTION_PATH, "--scores", "FILE", &o->scores,
         "write every ending's token count, losses and row of tokens as CSV"},
    };
    const CommandLine line = {
        "evaluate",
        "usage: evaluate --checkpoint FILE --tokenizer FILE --hellaswag FILE [options]\n"
        "Multiple-choice accuracy of a trained model on a file in HellaSwag's layout (one JSON\n"
        "object per line with \"ctx\", four \"endings\" and \"label\"), on the GPU.\n",
        22, NULL, options, sizeof(options) / sizeof(options[0])};
    int first = options_parse(&line, argc, argv);
    if (first < argc) die("unexpected argument '%s' (evaluate --help)", argv[first]);
}

// One ending's row: [first, first + n) of the token pool; the ending is its last `ending` tokens.
typedef struct {
    size_t first;
    int n, ending;
    double sum_loss;
} ChoiceRow;

typedef struct {
    int* tokens;             // every row's tokens, one after the other
    size_t n_tokens, cap;
    ChoiceRow* rows;         // CHOICES per item
    int longest;             // tokens of the longest row
} ChoiceRows;

static int* pool_grow(ChoiceRows* r, size_t more) {
    if (r->n_tokens + more > r->cap) {
        size_t cap = r->cap ? r->cap : 1 << 16;
        while (cap < r->n_tokens + more) cap *= 2;
        int* grown = (int*)realloc(r->tokens, cap * sizeof(int));
        if (!grown) die("out of host memory for the items' tokens");
        r->tokens = grown;
        r->cap = cap;
    }
    return r->tokens + r->n_tokens;
}

// The rows of the items, tokenized. A context that would not leave its longest ending room in
// the model's context loses its first tokens; an ending that alone does not fit is an error.
static ChoiceRows tokenize_items(const ChoiceItems* items, int n_items, const Tokenizer* tok, int maxT,
                                 const char* path) {
    ChoiceRows r;
    memset(&r, 0, sizeof(r));
    r.rows = (ChoiceRow*)calloc((size_t)n_items * CHOICES, sizeof(ChoiceRow));
    if (!r.rows) die("out of host memory for %d items", n_items);
    for (int i = 0; i < n_items; i++) {
        const ChoiceItem* it = &items->items[i];
        size_t ctx_len = strlen(it->context);
        int* ctx = (int*)malloc((ctx_len + 1) * sizeof(int));
        if (!ctx) die("out of host memory");
        int n_ctx = (int)tokenizer_encode(tok, (const unsigned char*)it->context, ctx_len, ctx);
        int* ends[CHOICES];
        int n_end[CHOICES], longest_end = 0;
        for (int k = 0; k < CHOICES; k++) {
            size_t len = strlen(it->endings[k]);
            char* spaced = (char*)malloc(len + 2);
            ends[k] = (int*)malloc((len + 2) * sizeof(int));
            if (!spaced || !ends[k]) die("out of host memory");
            spaced[0] = ' ';
            memcpy(spaced + 1, it->endings[k], len + 1);
            n_end[k] = (int)tokenizer_encode(tok, (const unsigned char*)spaced, len + 1, ends[k]);
            free(spaced);
            if (n_end[k] + 1 > maxT)
                die("%s:%d: ending %d is %d tokens, more than the model's context of %d leaves after "
                    "<|endoftext|>", path, it->line, k, n_end[k], maxT);
            if (n_end[k] > longest_end) longest_end = n_end[k];
        }
        int keep = n_ctx < maxT - 1 - longest_end ? n_ctx : maxT - 1 - longest_end;
        for (int k = 0; k < CHOICES; k++) {
            ChoiceRow* row = &r.rows[(size_t)i * CHOICES + k];
            int n = 1 + keep + n_end[k];
            int* t = pool_grow(&r, (size_t)n);
            t[0] = tokenizer_eot(tok);
            memcpy(t + 1, ctx + (n_ctx - keep), (size_t)keep * sizeof(int));
            memcpy(t + 1 + keep, ends[k], (size_t)n_end[k] * sizeof(int));
            row->first = r.n_tokens;
            row->n = n;
            row->ending = n_end[k];
            r.n_tokens += (size_t)n;
            if (n > r.longest) r.longest = n;
            free(ends[k]);
        }
        free(ctx);
    }
    return r;
}

// Scores rows [first, first + count) in one forward of B = count rows of T tokens: each row's
// sum of cross-entropies over its ending's tokens. Padding past a row is <|endoftext|>, its
// losses unread.
static void score_rows(GPT* g, ChoiceRows* r, size_t first, int count, int T, int pad, int* inputs,
                       int* targets) {
    for (int b = 0; b < count; b++) {
        const ChoiceRow* row = &r->rows[first + b];
        const int* t = r->tokens + row->first;
        for (int j = 0; j < T; j++) {
            inputs[b * T + j] = j < row->n ? t[j] : pad;
            targets[b * T + j] = j + 1 < row->n ? t[j + 1] : pad;
        }
    }
    gpt_forward(g, inputs, count, T);
    gpt_classifier(g, targets, count, T, 1.0f, 0);
    cudaCheck(cudaStreamSynchronize(g->stream));
    for (int b = 0; b < count; b++) {
        ChoiceRow* row = &r->rows[first + b];
        // Position j predicts token j + 1: the ending's tokens are predicted from n - ending - 1 on.
        double sum = 0.0;
        for (int j = row->n - row->ending - 1; j < row->n - 1; j++) sum += g->host_losses[b * T + j];
        row->sum_loss = sum;
    }
}

int main(int argc, char** argv) {
    EvaluateOptions o;
    parse_args(argc, argv, &o);
    char err[ERR_LEN];

    // Everything that needs no GPU first: the files, the items, their tokens.
    const ProgramInput files[] = {{"--checkpoint", o.checkpoint, 0}, {"--tokenizer", o.tokenizer, 0},
                                   {"--hellaswag", o.hellaswag, 0}};
    GPTConfig config;
    Tokenizer* tok;
    if (open_model_files(&files[0], &files[1], &config, &tok, err) != 0) die("%s", err);
    if (o.scores && (atomic_check(o.scores, err) != 0 || check_output_not_input(o.scores, files, 3, err) != 0))
        die("--scores %s", err);
    ChoiceItems items;
    if (choice_items_read(o.hellaswag, &items, err) != 0) die("--hellaswag %s", err);
    int n_items = o.max_items > 0 && o.max_items < items.n ? o.max_items : items.n;
    ChoiceRows rows = tokenize_items(&items, n_items, tok, config.maxT, o.hellaswag);
    int T = rows.longest, batch_rows = o.batch_items * CHOICES;
    if (batch_rows > n_items * CHOICES) batch_rows = n_items * CHOICES;
    ModelOptions mo = {.attention = {.kind = ATTENTION_FLASH}};
    const char* why = model_attention_unsupported(&config, &mo, batch_rows, T);
    if (why) die("%s: %s", o.checkpoint, why);
    float* values = read_model_values(o.checkpoint, &config);

    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
        die("no CUDA device: evaluate runs on an NVIDIA GPU");
    MemorySizes sizes = gpt_memory_sizes(&config, batch_rows, T, &mo, NULL, NULL);
    if (gpu_memory_unfit(memory_sizes_total(&sizes), err)) die("--batch-items %d %s; try fewer", o.batch_items, err);
    static GPT g;
    gpt_build(&g, config, batch_rows, T, &mo, NULL, NULL);
    gpt_set_params(&g, values);
    free(values);
    int* inputs = (int*)malloc((size_t)batch_rows * T * sizeof(int));
    int* targets = (int*)malloc((size_t)batch_rows * T * sizeof(int));
    if (!inputs || !targets) die("out of host memory");

    size_t total_rows = (size_t)n_items * CHOICES;
    for (size_t first = 0; first < total_rows; first += (size_t)batch_rows) {
        int count = total_rows - first < (size_t)batch_rows ? (int)(total_rows - first) : batch_rows;
        score_rows(&g, &rows, first, count, T, tokenizer_eot(tok), inputs, targets);
    }

    int right = 0, right_norm = 0;
    for (int i = 0; i < n_items; i++) {
        const ChoiceRow* r = &rows.rows[(size_t)i * CHOICES];
        int best = 0, best_norm = 0;
        for (int k = 1; k < CHOICES; k++) {
            if (r[k].sum_loss < r[best].sum_loss) best = k;
            if (r[k].sum_loss / r[k].ending < r[best_norm].sum_loss / r[best_norm].ending) best_norm = k;
        }
        right += best == items.items[i].label;
        right_norm += best_norm == items.items[i].label;
    }
    if (o.scores) {
        char tmp[4096];
        FILE* out = atomic_open(o.scores, tmp, sizeof(tmp), err);
        if (!out) die("--scores %s", err);
        // ids: the row's tokens, <|endoftext|> first, the ending's last.
        int ok = fprintf(out, "item,line,label,ending,tokens,sum_loss,mean_loss,ids\n") > 0;
        for (int i = 0; i < n_items; i++)
            for (int k = 0; k < CHOICES; k++) {
                const ChoiceRow* r = &rows.rows[(size_t)i * CHOICES + k];
                ok &= fprintf(out, "%d,%d,%d,%d,%d,%.9g,%.9g,", i, items.items[i].line, items.items[i].label, k,
                              r->ending, r->sum_loss, r->sum_loss / r->ending) > 0;
                for (int j = 0; j < r->n; j++) ok &= fprintf(out, j ? " %d" : "%d", rows.tokens[r->first + j]) > 0;
                ok &= fputc('\n', out) != EOF;
            }
        if (atomic_close(out, tmp, o.scores, ok, err) != 0) die("--scores %s", err);
    }
    printf("hellaswag: %s, %d items: acc %.4f (%d right), acc_norm %.4f (%d right)\n", o.hellaswag, n_items,
           (double)right / n_items, right, (double)right_norm / n_items, right_norm);
    free(inputs);
    free(targets);
    free(rows.tokens);
    free(rows.rows);
    choice_items_free(&items);
    gpt_free(&g);
    tokenizer_free(tok);
    return 0;
}
