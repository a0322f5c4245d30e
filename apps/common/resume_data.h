// Where a resumed run's data stream goes on (apps/common/resume_data.cpp).
#pragma once

#include <string>

#include "data/loader.h"
#include "zero/checkpoint.h"
#include "zero/engine.h"

namespace zt::app {

/// Continues `loader` where a loaded checkpoint's data stream stopped: after as many
/// samples of the saved epoch, also when the checkpoint was saved at another world size
/// or batch size (DataLoader::state_at_sample). Returns a note for the user when the
/// layout or the data set's size changed, empty otherwise.
std::string resume_data(data::DataLoader& loader, const zero::CheckpointExtra& extra);

/// The tensor `name` of a loaded checkpoint's app state, or an undefined tensor when the
/// checkpoint has none of that name (saved before it existed).
Tensor checkpoint_state(const std::vector<std::pair<std::string, Tensor>>& state,
                        const std::string& name);
/// checkpoint_state for counts: i64[n], else an error naming the checkpoint and saying what
/// the n counts are (`per`: "code (model.codebook_size)").
Tensor checkpoint_counts(const zero::CheckpointExtra& extra, const std::string& name, int64_t n,
                         const char* per);

/// Loads the checkpoint `dir` into `engine` and continues the run there: the loader's data
/// position (resume_data; its note on stderr after "`what`: note:") and each rank's random
/// stream, which dropout draws from (same world size; at another one the streams cannot
/// line up anyway; a note says so where the model has `dropout` to draw). With `say`,
/// prints where it resumed. Returns what the checkpoint
/// carries besides the engine's state: the step, the app's state. Every rank calls it.
zero::CheckpointExtra resume_training(zero::Engine& engine, data::DataLoader& loader,
                                      const std::string& dir, const comm::Communicator& comm,
                                      bool say, const char* what, double dropout);

}  // namespace zt::app
