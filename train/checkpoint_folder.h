// train/checkpoint_folder.h: the checkpoints of a run, a folder of pairs: model_%08d.bin (the
// model, gpt/checkpoint.h) and state_%08d.bin (the training state, train/state.h) of each step
// saved. Where a step's files go, which step a folder's latest pair is, and whether a folder may
// take a run's checkpoints.
#ifndef FLASHGPT_TRAIN_CHECKPOINT_FOLDER_H
#define FLASHGPT_TRAIN_CHECKPOINT_FOLDER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// dir/model_%08d.bin and dir/state_%08d.bin of a step (len bytes each); dies naming dir when a
// path does not fit.
void checkpoint_paths(const char* dir, int step, char* model, char* state, size_t len);
// The step of a checkpoint file's name (model_%08d.bin or state_%08d.bin, no folder), or -1 for
// any other name.
int checkpoint_file_step(const char* name);
// The latest step in dir with both files; -1 if none, -2 with err when dir cannot be read.
int latest_checkpoint_step(const char* dir, char* err);
// Whether a run may write its checkpoints into dir: 0 when it holds none of another run (whose
// steps this run would write over, and whose --resume would take whichever run got further) or is
// resumed_dir (NULL: none), the folder of the run resumed, however spelled; else the number of
// checkpoint files it holds with err saying so, or -1 with err when it cannot be read.
int check_checkpoint_folder(const char* dir, const char* resumed_dir, char* err);

#ifdef __cplusplus
}
#endif

#endif
