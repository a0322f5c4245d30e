# cuDNN and NCCL as the imported targets zt::cudnn and zt::nccl, found beside the CUDA
# toolkit (lib/ or lib64/) or in the system paths. Included by zt's own build (with
# ZT_CUDA_LIBS_GLOBAL, so every folder sees them) and by the installed package config,
# after find_package(CUDAToolkit). Sets ZT_CUDA_LIBS_ERROR instead of failing, so the
# package can report "zt not found" with the reason.
set(ZT_CUDA_LIBS_ERROR "")
if(ZT_CUDA_LIBS_GLOBAL)
  set(_zt_scope GLOBAL)
else()
  set(_zt_scope "")
endif()

if(NOT TARGET zt::cudnn)
  find_library(ZT_CUDNN_LIB cudnn
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
                     ${CUDAToolkit_TARGET_DIR}
               PATH_SUFFIXES lib lib64)
  find_path(ZT_CUDNN_INCLUDE_DIR cudnn.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
                  ${CUDAToolkit_TARGET_DIR}
            PATH_SUFFIXES include)
  if(ZT_CUDNN_LIB AND ZT_CUDNN_INCLUDE_DIR)
    add_library(zt::cudnn UNKNOWN IMPORTED ${_zt_scope})
    set_target_properties(zt::cudnn PROPERTIES IMPORTED_LOCATION "${ZT_CUDNN_LIB}"
                                               INTERFACE_INCLUDE_DIRECTORIES "${ZT_CUDNN_INCLUDE_DIR}")
  else()
    string(APPEND ZT_CUDA_LIBS_ERROR
           "cuDNN not found (libcudnn and cudnn.h): install cuDNN or point "
           "-DZT_CUDNN_LIB=/path/libcudnn.so and -DZT_CUDNN_INCLUDE_DIR=/path. ")
  endif()
endif()

if(NOT TARGET zt::nccl)
  find_library(ZT_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/lib)
  if(ZT_NCCL_LIB)
    add_library(zt::nccl UNKNOWN IMPORTED ${_zt_scope})
    set_target_properties(zt::nccl PROPERTIES IMPORTED_LOCATION "${ZT_NCCL_LIB}")
  else()
    string(APPEND ZT_CUDA_LIBS_ERROR
           "NCCL not found (libnccl): install NCCL or point -DZT_NCCL_LIB=/path/libnccl.so. ")
  endif()
endif()
unset(_zt_scope)
