// train/checkpoint_folder.c: a run's folder of checkpoints (train/checkpoint_folder.h).
#include "train/checkpoint_folder.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/error.h"
#include "common/output_path.h"

void checkpoint_paths(const char* dir, int step, char* model, char* state, size_t len) {
    if (snprintf(model, len, "%s/model_%08d.bin", dir, step) >= (int)len ||
        snprintf(state, len, "%s/state_%08d.bin", dir, step) >= (int)len)
        die("%s: path too long", dir);
}

// A name is a checkpoint file's when it is the very name checkpoint_paths gives its step: "state_9.bin"
// and "state_+0000009.bin" are another program's files, not step 9's, which a resume would take up.
int checkpoint_file_step(const char* name) {
    static const char* const kinds[] = {"model_", "state_"};
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(kinds[k]);
        if (strncmp(name, kinds[k], n) != 0 || !isdigit((unsigned char)name[n])) continue;
        errno = 0;
        long step = strtol(name + n, NULL, 10);
        char canonical[64];
        if (errno || step > INT_MAX) return -1;
        snprintf(canonical, sizeof(canonical), "%s%08ld.bin", kinds[k], step);
        return strcmp(name, canonical) == 0 ? (int)step : -1;
    }
    return -1;
}

int latest_checkpoint_step(const char* dir, char* err) {
    DIR* d = opendir(dir);
    if (!d) {
        set_err(err, "%s: cannot open the directory: %s", dir, strerror(errno));
        return -2;
    }
    int best = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int step = checkpoint_file_step(e->d_name);
        if (step < 0 || strncmp(e->d_name, "state_", 6) != 0) continue;
        char model[4096], state[4096];
        checkpoint_paths(dir, step, model, state, sizeof(model));
        if (step > best && access(model, R_OK) == 0) best = step;
    }
    closedir(d);
    return best;
}

// How many checkpoint files (model_*.bin and state_*.bin of a step) dir holds, the latest step
// among them in *latest; 0 when dir does not exist, -1 with err when it cannot be read.
static int count_checkpoint_files(const char* dir, int* latest, char* err) {
    DIR* d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        set_err(err, "cannot read the folder: %s", strerror(errno));
        return -1;
    }
    int n = 0;
    *latest = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int step = checkpoint_file_step(e->d_name);
        if (step < 0) continue;
        n++;
        if (step > *latest) *latest = step;
    }
    closedir(d);
    return n;
}

int check_checkpoint_folder(const char* dir, const char* resumed_dir, char* err) {
    if (resumed_dir && same_file(dir, resumed_dir)) return 0;
    int latest, n = count_checkpoint_files(dir, &latest, err);
    if (n < 0) {
        char why[ERR_LEN];
        snprintf(why, sizeof(why), "%s", err);
        set_err(err, "%s: %s", dir, why);
    } else if (n > 0) {
        set_err(err, "%s holds the checkpoints of another run (%d file%s, the latest of step %d)", dir, n,
                n > 1 ? "s" : "", latest);
    }
    return n;
}
