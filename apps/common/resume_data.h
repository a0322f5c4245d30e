// Where a resumed run's data stream goes on (apps/common/resume_data.cpp).
#pragma once

#include <string>

#include "data/loader.h"
#include "zero/checkpoint.h"

namespace zt::app {

/// Continues `loader` where a loaded checkpoint's data stream stopped: after as many
/// samples of the saved epoch, also when the checkpoint was saved at another world size
/// or batch size (DataLoader::state_at_sample). Returns a note for the user when the
/// layout or the data set's size changed, empty otherwise.
std::string resume_data(data::DataLoader& loader, const zero::CheckpointExtra& extra);

}  // namespace zt::app
