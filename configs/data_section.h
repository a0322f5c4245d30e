// The `data` section of an app config, read into data/'s plain DataConfig (data/ reads no
// config files), and the names its enums are spelled by.
#pragma once

#include "configs/config.h"
#include "data/data_config.h"

namespace zt::config {

/// Reads a `data` mapping into `d` (keys it does not name are kept) and checks what spans
/// its keys (a path for image_folder and npy data, prefetch under a timeout, no eval_path
/// for synthetic data). Each error points at its key.
void read_data(Section s, data::DataConfig& d);

}  // namespace zt::config
