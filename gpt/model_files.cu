// gpt/model_files.cu: the files of a trained model (gpt/model_files.h).
#include "gpt/model_files.h"

#include "gpt/checkpoint.h"

int open_model_files(const ProgramInput* checkpoint, const ProgramInput* tokenizer, GPTConfig* config, Tokenizer** tok,
                     char* err) {
    char why[ERR_LEN];
    *tok = NULL;
    if (read_model_shape(checkpoint->path, config, why) != 0) {
        set_err(err, "%s: %s", checkpoint->flag, why);
        return -1;
    }
    Tokenizer* t = tokenizer_load_sized(tokenizer->path, config->V, why);
    if (!t) {
        set_err(err, "%s %s", tokenizer->flag, why);
        return -1;
    }
    if (architecture_document_token_differs(&config->arch, tokenizer_eot(t), checkpoint->path, why, sizeof(why))) {
        set_err(err, "%s %s: %s", tokenizer->flag, tokenizer->path, why);
        tokenizer_free(t);
        return -1;
    }
    *tok = t;
    return 0;
}
