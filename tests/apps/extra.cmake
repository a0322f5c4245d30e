# tests/apps: the fault-injection tests run the vqtok and vqgpt binaries (and mpirun when found).
target_compile_definitions(${exe} PRIVATE ZT_VQTOK_BIN="$<TARGET_FILE:vqtok>"
                                          ZT_VQGPT_BIN="$<TARGET_FILE:vqgpt>")
add_dependencies(${exe} vqtok vqgpt)
find_program(ZT_MPIRUN NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
if(ZT_MPIRUN)
  target_compile_definitions(${exe} PRIVATE ZT_MPIRUN="${ZT_MPIRUN}")
endif()
# Their mpirun jobs (2 processes) carry the label mpi too (without mpirun they skip).
zt_test_properties(${exe} "^apps\\.FaultInjection\\.(AKilledMpiJob|ASigtermToOneRankOfAnMpiJob)"
                   LABELS apps mpi PROCESSORS 2
                   ENVIRONMENT OMP_WAIT_POLICY=passive ${ZT_MPI_TEST_ENV})

# The GPU tests among the apps tests carry the label cuda too: `ctest -L cuda` runs every
# GPU test. (Without a GPU they skip, and say so.)
zt_test_properties(${exe} "^apps\\.[A-Za-z0-9_]+\\.[A-Za-z0-9_]*(Cuda|Gpu)" LABELS apps cuda)

# Two-process mpirun jobs (MPMD: `rank 0's arguments : rank 1's`) that must stop at
# start-up with a message (EXPECT), exit status 1, and nothing written at NOT_WRITTEN
# (paths, '|' between them); where `agreed`, without MPI_ABORT: an error every rank raises
# together ends each process normally, printed once by rank 0.
function(zt_mpirun_app_test name pass agreed)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "NOT_WRITTEN" "RANK0;RANK1")
  add_test(NAME apps.mpi.${name}
           COMMAND ${CMAKE_COMMAND} -DEXIT_CODE=1 "-DEXPECT=${pass}"
                   "-DNOT_WRITTEN=${arg_NOT_WRITTEN}" -P ${ZT_RUN_AND_CHECK} --
                   ${ZT_MPIRUN} --allow-run-as-root --oversubscribe -np 1 ${arg_RANK0} :
                   -np 1 ${arg_RANK1})
  set_tests_properties(apps.mpi.${name} PROPERTIES LABELS "mpi;apps" TIMEOUT 60 PROCESSORS 2
    ENVIRONMENT "${ZT_MPI_TEST_ENV}")
  if(agreed)
    set_tests_properties(apps.mpi.${name} PROPERTIES FAIL_REGULAR_EXPRESSION "MPI_ABORT was invoked")
  endif()
endfunction()

# A command line that must be refused: exit status `code` and output matching `expect`
# (a regex); the command is the rest of the arguments.
function(zt_check_test name code timeout expect)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -DEXIT_CODE=${code} "-DEXPECT=${expect}"
                                -P ${ZT_RUN_AND_CHECK} -- ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS apps TIMEOUT ${timeout})
endfunction()
function(zt_refusal_test name code expect)
  zt_check_test(${name} ${code} 30 "${expect}" ${ARGN})
endfunction()

if(ZT_MPIRUN)
  set(_vqtok $<TARGET_FILE:vqtok>)
  set(_out ${CMAKE_BINARY_DIR}/tests/apps_mpi_mismatch)
  set(_cfg --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml --set output_dir=${_out})
  # Ranks given different --set options stop naming the key (and write nothing), instead
  # of training silently or failing inside a collective; so does every subcommand (eval
  # would score two different eval sets).
  zt_mpirun_app_test(config_mismatch "'train.lr' is 1e-3 on rank 0 but 2e-3 on rank 1" ON
    NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} train ${_cfg} --set train.lr=1e-3
    RANK1 ${_vqtok} train ${_cfg} --set train.lr=2e-3)
  zt_mpirun_app_test(config_mismatch_eval
    "vqtok eval: error: the ranks were started with different configurations: 'data.seed' is 1 on rank 0 but 2 on rank 1"
    ON NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} eval ${_cfg} --weights none --set data.seed=1
    RANK1 ${_vqtok} eval ${_cfg} --weights none --set data.seed=2)
  # Ranks started as different subcommands stop naming both: eval and encode used to wait
  # for each other in their first different collectives until the communicator's timeout
  # (ten minutes), and train and eval stopped on a config key they resolve differently.
  zt_mpirun_app_test(command_mismatch
    "vqtok eval: error: the ranks were started with different commands: 'command' is vqtok eval on rank 0 but vqtok encode on rank 1"
    ON NOT_WRITTEN ${_out}/ids.npy
    RANK0 ${_vqtok} eval ${_cfg} --weights none
    RANK1 ${_vqtok} encode ${_cfg} --weights none -o ${_out}/ids.npy)
  # Ranks given different options of how the work is split or what it reads stop naming
  # the option and both values, before any weights are read (eval used to score 6 clips, 4
  # of one rank's batch and 2 of the other's).
  zt_mpirun_app_test(options_mismatch_eval
    "vqtok eval: error: the ranks were started with different options: '--batch' is 4 on rank 0 but 2 on rank 1"
    ON NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} eval ${_cfg} --weights none --batches 1 --batch 4
    RANK1 ${_vqtok} eval ${_cfg} --weights none --batches 1 --batch 2)
  zt_mpirun_app_test(options_mismatch_encode
    "vqtok encode: error: the ranks were started with different options: '--limit' is 1 on rank 0 but 2 on rank 1"
    ON NOT_WRITTEN ${_out}/ids.npy
    RANK0 ${_vqtok} encode ${_cfg} --weights none -o ${_out}/ids.npy --limit 1
    RANK1 ${_vqtok} encode ${_cfg} --weights none -o ${_out}/ids.npy --limit 2)
  zt_mpirun_app_test(options_mismatch_decode
    "vqtok decode: error: the ranks were started with different options: '--codes' is [^ ]*vqtok_tiny.yaml on rank 0 but [^ ]*vqgpt_tiny.yaml on rank 1"
    ON NOT_WRITTEN ${_out}/frames
    RANK0 ${_vqtok} decode ${_cfg} --weights none -o ${_out}/frames
          --codes ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    RANK1 ${_vqtok} decode ${_cfg} --weights none -o ${_out}/frames
          --codes ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml)
  # Weights named differently on the ranks stop naming the option: rank 0 reads them and
  # the others receive them, so another rank's path was passed over, or (a checkpoint
  # folder on one rank, a file on the other) the ranks parted ways in their collectives.
  zt_mpirun_app_test(options_mismatch_weights
    "vqtok eval: error: the ranks were started with different options: '--weights' is [^ ]*configs on rank 0 but [^ ]*vqtok_tiny.yaml on rank 1"
    ON NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} eval ${_cfg} --weights ${PROJECT_SOURCE_DIR}/configs
    RANK1 ${_vqtok} eval ${_cfg} --weights ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml)
  zt_mpirun_app_test(options_mismatch_export
    "vqtok export: error: the ranks were started with different options: '--checkpoint' is [^ ]*configs on rank 0 but \\(not given\\) on rank 1"
    ON NOT_WRITTEN ${_out}/tok.safetensors
    RANK0 ${_vqtok} export ${_cfg} --checkpoint ${PROJECT_SOURCE_DIR}/configs -o ${_out}/tok.safetensors
    RANK1 ${_vqtok} export ${_cfg} -o ${_out}/tok.safetensors)
  zt_mpirun_app_test(options_mismatch_export_format
    "vqtok export: error: the ranks were started with different options: '--format' is baai on rank 0 but transformers on rank 1"
    ON NOT_WRITTEN ${_out}/tok.safetensors
    RANK0 ${_vqtok} export ${_cfg} -o ${_out}/tok.safetensors
    RANK1 ${_vqtok} export ${_cfg} -o ${_out}/tok.safetensors --format transformers)
  set(_gpt_cfg --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml --set output_dir=${_out})
  zt_mpirun_app_test(options_mismatch_sample
    "vqgpt sample: error: the ranks were started with different options: '--seed' is 1 on rank 0 but 2 on rank 1"
    ON NOT_WRITTEN ${_out}/grid.png
    RANK0 $<TARGET_FILE:vqgpt> sample ${_gpt_cfg} -o ${_out}/grid.png --seed 1
    RANK1 $<TARGET_FILE:vqgpt> sample ${_gpt_cfg} -o ${_out}/grid.png --seed 2)
  zt_mpirun_app_test(options_mismatch_tokenizer
    "vqgpt train: error: the ranks were started with different options: '--tokenizer' is [^ ]*configs on rank 0 but [^ ]*vqtok_tiny.yaml on rank 1"
    ON NOT_WRITTEN ${_out}
    RANK0 $<TARGET_FILE:vqgpt> train ${_gpt_cfg} --tokenizer ${PROJECT_SOURCE_DIR}/configs
    RANK1 $<TARGET_FILE:vqgpt> train ${_gpt_cfg} --tokenizer ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml)
  zt_mpirun_app_test(options_mismatch_quick_tokenizer
    "vqgpt tokenizer: error: the ranks were started with different options: '--steps' is 3 on rank 0 but 5 on rank 1"
    ON NOT_WRITTEN ${_out}/quick
    RANK0 $<TARGET_FILE:vqgpt> tokenizer ${_gpt_cfg} --out ${_out}/quick --steps 3
    RANK1 $<TARGET_FILE:vqgpt> tokenizer ${_gpt_cfg} --out ${_out}/quick --steps 5)
  zt_mpirun_app_test(options_mismatch_resume
    "vqtok train: error: the ranks were started with different options: '--overwrite' is \\(not given\\) on rank 0 but true on rank 1"
    ON NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} train ${_cfg} --set train.steps=1 --resume
    RANK1 ${_vqtok} train ${_cfg} --set train.steps=1 --overwrite)
  # Every option of the command line is compared, not only those a command reads on every
  # rank: rank 0 alone writes --out, so another rank's was passed over.
  zt_mpirun_app_test(options_mismatch_out
    "vqtok eval: error: the ranks were started with different options: '--out' is [^ ]*a.json on rank 0 but [^ ]*b.json on rank 1"
    ON NOT_WRITTEN "${_out}/a.json|${_out}/b.json"
    RANK0 ${_vqtok} eval ${_cfg} --weights none --batches 1 -o ${_out}/a.json
    RANK1 ${_vqtok} eval ${_cfg} --weights none --batches 1 -o ${_out}/b.json)
  zt_mpirun_app_test(options_mismatch_plan
    "vqtok plan: error: the ranks were started with different options: '--steps' is 1 on rank 0 but 3 on rank 1"
    ON NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} plan ${_cfg} --steps 1
    RANK1 ${_vqtok} plan ${_cfg} --steps 3)
  # Ranks in different working directories: a relative output_dir names two folders, and
  # the run stops at start-up (it used to fail at its first checkpoint save).
  set(_wdir ${CMAKE_BINARY_DIR}/tests/apps_mpi_wdir)
  file(MAKE_DIRECTORY ${_wdir}/a ${_wdir}/b)
  set(_rel train --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml --set output_dir=out)
  zt_mpirun_app_test(working_directories
    "views of output_dir: 'lock in output_dir out' is rank 0's on rank 0 but missing on rank 1" ON
    NOT_WRITTEN "${_wdir}/a/out/checkpoints|${_wdir}/a/out/metrics.jsonl|${_wdir}/b/out"
    RANK0 -wdir ${_wdir}/a ${_vqtok} ${_rel}
    RANK1 -wdir ${_wdir}/b ${_vqtok} ${_rel})
  # The same relative input names other files under two working directories: encode named
  # no data and failed inside a collective (or encoded each rank's own rows into one file),
  # decode mixed both files' frames (or failed on one rank alone); now every rank stops at
  # start-up naming what each read.
  set(_npy ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/npy_header)
  file(COPY_FILE ${_npy}/images.npy ${_wdir}/a/in.npy)
  file(COPY_FILE ${_npy}/clip.npy ${_wdir}/b/in.npy)
  set(_enc encode ${_cfg} --set data.frames=4 --weights none --input in.npy -o ${_out}/wdir.npy)
  zt_mpirun_app_test(working_directories_encode
    "vqtok encode: error: the ranks were started with different data: 'data' is NpyArray.'in.npy', .2, 3, 2, 2."
    ON NOT_WRITTEN ${_out}/wdir.npy
    RANK0 -wdir ${_wdir}/a ${_vqtok} ${_enc}
    RANK1 -wdir ${_wdir}/b ${_vqtok} ${_enc})
  set(_dec decode ${_cfg} --weights none --codes in.npy -o ${_out}/wdir_frames)
  zt_mpirun_app_test(working_directories_decode
    "vqtok decode: error: the ranks were started with different inputs: '--codes' is 'in.npy' holding i32 .2, 3, 2, 2., hash [0-9a-f]+ on rank 0 but 'in.npy' holding f32"
    ON NOT_WRITTEN ${_out}/wdir_frames
    RANK0 -wdir ${_wdir}/a ${_vqtok} ${_dec}
    RANK1 -wdir ${_wdir}/b ${_vqtok} ${_dec})
  # A config that does not load is one error, printed once by rank 0, and every process
  # ends normally; where only rank 1's fails, rank 0 names it.
  zt_mpirun_app_test(config_error "vqtok: error: --set train.lr=fast: train.lr: expected a number" ON
    NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} train ${_cfg} --set train.lr=fast
    RANK1 ${_vqtok} train ${_cfg} --set train.lr=fast)
  set_tests_properties(apps.mpi.config_error PROPERTIES FAIL_REGULAR_EXPRESSION
    "MPI_ABORT was invoked;train.lr: expected a number[^\n]*\n.*train.lr: expected a number")
  zt_mpirun_app_test(config_error_rank1 "vqtok: error: rank 1: --set train.lr=fast: train.lr: expected" ON
    NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} train ${_cfg}
    RANK1 ${_vqtok} train ${_cfg} --set train.lr=fast)
  # mpirun gives its standard input to rank 0 alone (the others read /dev/null): a config
  # piped in is read by rank 0 and sent to the others, which failed with "the config is
  # empty". A DeepSpeed config piped in, read by each process, is an error saying so.
  function(zt_mpirun_stdin_test name code expect input)
    add_test(NAME apps.mpi.${name}
             COMMAND ${CMAKE_COMMAND} -DEXIT_CODE=${code} "-DEXPECT=${expect}" -DINPUT=${input}
                     -P ${ZT_RUN_AND_CHECK} -- ${ZT_MPIRUN} --allow-run-as-root --oversubscribe
                     -np 2 ${ARGN})
    set_tests_properties(apps.mpi.${name} PROPERTIES LABELS "mpi;apps" TIMEOUT 60 PROCESSORS 2
      ENVIRONMENT "${ZT_MPI_TEST_ENV}")
  endfunction()
  zt_mpirun_stdin_test(config_stdin 0 "world size 2 .mpi.*\"complete\":true"
    ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    ${_vqtok} plan --config /dev/stdin --steps 1 --set output_dir=${_out})
  set(_ds_json ${CMAKE_BINARY_DIR}/tests/apps_mpi_stdin_ds.json)
  file(WRITE ${_ds_json} "{\"train_micro_batch_size_per_gpu\": 2}\n")
  zt_mpirun_stdin_test(deepspeed_stdin 1
    "rank 1: /dev/stdin: the DeepSpeed config is empty.*under mpirun, standard input reaches rank 0 alone"
    ${_ds_json} ${_vqtok} plan ${_cfg} --steps 1 --deepspeed /dev/stdin)
  # zt-bench vqgpt reads its config as the apps do (rank 1 failed with "the config is empty").
  if(TARGET zt-bench)
    zt_mpirun_stdin_test(bench_config_stdin 0 "\"bench\":\"vqgpt\".*\"ranks\":2"
      ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml
      $<TARGET_FILE:zt-bench> vqgpt --config /dev/stdin --warmup 0 --steps 1)
  endif()
  # --ranks against mpirun's process count: every rank sees the same conflict, so it is one
  # error, printed once by rank 0, with no MPI_Abort.
  zt_mpirun_app_test(ranks_conflict "vqtok: error: launch: --ranks 3 conflicts with the 2 processes" ON
    NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} train ${_cfg} --ranks 3
    RANK1 ${_vqtok} train ${_cfg} --ranks 3)
  set_tests_properties(apps.mpi.ranks_conflict PROPERTIES FAIL_REGULAR_EXPRESSION
    "MPI_ABORT was invoked;conflicts with the 2[^\n]*\n.*conflicts with the 2")
  # --ranks 1, given, is a conflict too (it ran two ranks without a word).
  zt_mpirun_app_test(ranks_one_given "vqtok: error: launch: --ranks 1 conflicts with the 2 processes" ON
    NOT_WRITTEN ${_out}
    RANK0 ${_vqtok} train ${_cfg} --ranks 1
    RANK1 ${_vqtok} train ${_cfg} --ranks 1)
  # A rank that fails while it starts (here its $ZT_COMM_TIMEOUT_MS does not parse) ends
  # the job at once (MPI_Abort); it used to wait in MPI_Finalize while rank 0 waited out its
  # timeout (120 s here, past the test's limit).
  zt_mpirun_app_test(startup_failure
    "rank 1 aborts the MPI job: it failed at start-up: ZT_COMM_TIMEOUT_MS: 'soon'" OFF
    NOT_WRITTEN ${_out}
    RANK0 -x ZT_COMM_TIMEOUT_MS=120000 ${_vqtok} train ${_cfg}
    RANK1 -x ZT_COMM_TIMEOUT_MS=soon ${_vqtok} train ${_cfg})
endif()

# tests/apps: the shipped configs are read from the source tree.
target_compile_definitions(${exe} PRIVATE ZT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# Tests of zt as users meet it (label apps):
#  - apps.help.<app>: every app and subcommand answers --help at once (help.cmake);
#  - apps.embed.*: zt installed into a fresh prefix, apps/examples/embed configured and
#    built against it with find_package(zt), then run on 2 thread ranks and under
#    mpirun -np 2; and the same example configured with zt as a subdirectory;
#  - apps.embed.readme: the README's embedding example is that example's main.cpp.
# The install reads the finished build: ctest runs after `cmake --build` (zt.sh test).
foreach(app vqtok vqgpt zt-bench)
  if(TARGET ${app})
    add_test(NAME apps.help.${app}
             COMMAND ${CMAKE_COMMAND} -DAPP=$<TARGET_FILE:${app}> -P
                     ${CMAKE_CURRENT_SOURCE_DIR}/apps/help.cmake)
    set_tests_properties(apps.help.${app} PROPERTIES LABELS apps TIMEOUT 120)
  endif()
endforeach()

add_test(NAME apps.embed.readme
         COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -P
                 ${CMAKE_CURRENT_SOURCE_DIR}/apps/readme_example.cmake)
set_tests_properties(apps.embed.readme PROPERTIES LABELS apps)

if(ZT_INSTALL)
  set(_zt_embed ${CMAKE_CURRENT_BINARY_DIR}/embed)
  set(_zt_example_args
      -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/apps/examples/embed -DGENERATOR=${CMAKE_GENERATOR}
      -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM} -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
      -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER} -DBUILD_TYPE=${CMAKE_BUILD_TYPE})
  if(ZT_CUDA)  # the package finds the toolkit zt was built with
    get_filename_component(_zt_cuda_root ${CUDAToolkit_BIN_DIR} DIRECTORY)
    list(APPEND _zt_example_args -DCUDA_ROOT=${_zt_cuda_root})
  endif()
  if(ZT_SANITIZE)  # the libraries need the sanitizer runtime
    list(APPEND _zt_example_args -DSANITIZE=${ZT_SANITIZE})
  endif()

  add_test(NAME apps.embed.install
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DPREFIX=${_zt_embed}/prefix -P
                   ${CMAKE_CURRENT_SOURCE_DIR}/apps/install_package.cmake)
  set_tests_properties(apps.embed.install PROPERTIES LABELS apps TIMEOUT 120
                       FIXTURES_SETUP zt_installed)

  add_test(NAME apps.embed.build
           COMMAND ${CMAKE_COMMAND} ${_zt_example_args} -DBINARY_DIR=${_zt_embed}/example
                   -DPREFIX=${_zt_embed}/prefix -P
                   ${CMAKE_CURRENT_SOURCE_DIR}/apps/build_example.cmake)
  set_tests_properties(apps.embed.build PROPERTIES LABELS apps TIMEOUT 300
                       FIXTURES_REQUIRED zt_installed FIXTURES_SETUP zt_example)

  add_test(NAME apps.embed.threads COMMAND ${_zt_embed}/example/embed_example --ranks 2)
  set_tests_properties(apps.embed.threads PROPERTIES LABELS apps TIMEOUT 60
                       FIXTURES_REQUIRED zt_example ENVIRONMENT "OMP_WAIT_POLICY=passive")
  # A rank count below 1 is a usage mistake, answered with the usage line.
  add_test(NAME apps.embed.ranks_zero COMMAND ${_zt_embed}/example/embed_example --ranks 0)
  set_tests_properties(apps.embed.ranks_zero PROPERTIES LABELS apps TIMEOUT 60
                       FIXTURES_REQUIRED zt_example
                       PASS_REGULAR_EXPRESSION "usage: embed_example \\[--ranks N\\]")

  add_test(NAME apps.embed.tokenizer
           COMMAND ${CMAKE_COMMAND} "-DEXPECT=codes identical on every rank" -P ${ZT_RUN_AND_CHECK}
                   -- ${_zt_embed}/example/tokenizer_example --ranks 2)
  set_tests_properties(apps.embed.tokenizer PROPERTIES LABELS apps TIMEOUT 60
                       FIXTURES_REQUIRED zt_example ENVIRONMENT "OMP_WAIT_POLICY=passive")

  find_program(ZT_MPIRUN NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
  if(ZT_MPIRUN)
    add_test(NAME apps.embed.mpi
             COMMAND ${ZT_MPIRUN} --allow-run-as-root --oversubscribe -np 2
                     ${_zt_embed}/example/embed_example)
    set_tests_properties(apps.embed.mpi PROPERTIES LABELS "apps;mpi" TIMEOUT 120 PROCESSORS 2
      FIXTURES_REQUIRED zt_example
      ENVIRONMENT "${ZT_MPI_TEST_ENV};OMP_WAIT_POLICY=passive")
    # The tokenizer loaded on rank 0 only and broadcast over MPI (CPU tensors): every
    # process tokenizes to the same codes.
    add_test(NAME apps.embed.tokenizer_mpi
             COMMAND ${CMAKE_COMMAND} "-DEXPECT=codes identical on every rank"
                     -P ${ZT_RUN_AND_CHECK} -- ${ZT_MPIRUN} --allow-run-as-root --oversubscribe
                     -np 2 ${_zt_embed}/example/tokenizer_example)
    set_tests_properties(apps.embed.tokenizer_mpi PROPERTIES LABELS "apps;mpi" TIMEOUT 120
      PROCESSORS 2 FIXTURES_REQUIRED zt_example
      ENVIRONMENT "${ZT_MPI_TEST_ENV};OMP_WAIT_POLICY=passive")
  endif()

  add_test(NAME apps.embed.subdirectory
           COMMAND ${CMAKE_COMMAND} ${_zt_example_args} -DBINARY_DIR=${_zt_embed}/subdirectory
                   -DZT_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DCONFIGURE_ONLY=ON -P
                   ${CMAKE_CURRENT_SOURCE_DIR}/apps/build_example.cmake)
  set_tests_properties(apps.embed.subdirectory PROPERTIES LABELS apps TIMEOUT 300)
endif()

# zt-bench gpt on a tiny shape, bf16 on 2 thread ranks: the benchmark runs end to end and
# prints its JSON line (a smoke test; the numbers are not checked), then with --kernels
# one line per kernel, the matrix multiplies among them, with the host's time per kernel, and
# the summary line (core.KernelProfile checks the profile itself). The head (2048 x 64) is above the persistence threshold, so the step
# releases it, and the phase clocks must not read it.
# The apps.bench entries are zt_check_test's: each needs its exit status (0, or 1 for a
# refusal) as well as its line.
if(TARGET zt-bench)
  zt_check_test(apps.bench.gpt 0 60 "\"bench\":\"gpt\".*\"attention\":\"auto\",\"attention_fused\":false,.*\"tokens_per_s\":[0-9].*\"kernel\":\"gemm[a-z_]*\",\"calls_per_step\":[1-9][^\n]*\"host_ms_per_step\":[0-9.]+,\"host_us_per_call\":[0-9].*\"kernels\":\"all\",\"ms_per_step\":[0-9.]+,\"host_ms_per_step\":[0-9.]+,\"wall_ms_per_step\":[0-9]"
    $<TARGET_FILE:zt-bench> gpt --layers 2 --width 64 --heads 4 --seq 32 --vocab 2048 --batch 2
    --steps 1 --dtype bf16 --ranks 2 --kernels)
  # zt-bench attention on the CPU (the kernels' warp emulation, a small shape): every
  # built tile shape runs, the ones that keep the default's bits say so (rel_err 0), the
  # atomic backward runs too (its dq within 1e-2 of split's), and the fastest are named.
  # --flash-tiles and --flash-backward reach the GPT's attention.
  zt_check_test(apps.bench.attention 0 60 "\"pass\":\"forward\",\"tiles\":\"16x32\",\"default\":true[^\n]*\"rel_err\":0}.*\"pass\":\"forward\",\"tiles\":\"32x32\",\"default\":false[^\n]*\"rel_err\":0}.*\"tiles\":\"32x64\".*\"tiles\":\"16x32x3\",\"default\":false[^\n]*\"rel_err\":0}.*\"pass\":\"backward\",\"tiles\":\"32x32\"[^\n]*\"rel_err\":0}.*\"tiles\":\"16x32x3\",\"default\":false[^\n]*\"rel_err\":0}.*\"pass\":\"backward_atomic\",\"tiles\":\"16x32\",\"default\":true[^\n]*\"rel_err\":(0|[0-9.]+e-0[3-9])}.*\"fastest_forward\":\"[0-9x]+\",\"fastest_backward\""
    $<TARGET_FILE:zt-bench> attention --device cpu --batch 1 --heads 2 --seq 150 --reps 1)
  # One causal token: its dq and dk are zeros (the softmax of one score is 1), and every
  # printed number is JSON (an error against zeros was -nan): rel_err 0 where the bits are
  # kept, no nan or inf anywhere.
  zt_check_test(apps.bench.attention_one_token 0 60 "\"pass\":\"forward\",\"tiles\":\"16x32\",\"default\":true[^\n]*\"rel_err\":0}.*\"pass\":\"backward\",\"tiles\":\"16x32\",\"default\":true[^\n]*\"rel_err\":0}"
    $<TARGET_FILE:zt-bench> attention --device cpu --batch 1 --heads 1 --seq 1 --dim 32 --reps 1)
  set_tests_properties(apps.bench.attention_one_token PROPERTIES FAIL_REGULAR_EXPRESSION "nan;inf")
  zt_check_test(apps.bench.gpt_flash_tiles 0 60 "\"attention\":\"flash\",\"attention_fused\":true,\"flash_tiles\":\"32x64,16x64\",\"flash_backward\":\"atomic\""
    $<TARGET_FILE:zt-bench> gpt --layers 1 --width 64 --heads 2 --seq 32 --vocab 256 --batch 1
    --steps 1 --dtype bf16 --attention flash --flash-tiles 32x64,16x64 --flash-backward atomic)
  # --checkpoint-activations: the recomputing step runs end to end and says so.
  zt_check_test(apps.bench.gpt_checkpoint_activations 0 60 "\"bench\":\"gpt\".*\"activation_checkpointing\":true.*\"tokens_per_s\":[0-9]"
    $<TARGET_FILE:zt-bench> gpt --layers 2 --width 64 --heads 4 --seq 32 --vocab 2048 --batch 2
    --steps 1 --checkpoint-activations)
  # --tie-embeddings: the token table is the head (vocab x width counted once); the line
  # names the GEMM policy --gemm-benchmark sets (no effect on the CPU).
  zt_check_test(apps.bench.gpt_tied 0 60 "\"bench\":\"gpt\".*\"gemm_benchmark\":true.*\"tied\":true.*\"params\":29536,.*\"tokens_per_s\":[0-9]"
    $<TARGET_FILE:zt-bench> gpt --layers 1 --width 32 --heads 2 --seq 16 --vocab 512 --batch 2
    --steps 1 --tie-embeddings --gemm-benchmark)
  # The run says on stderr what it measures and each step as it ends (the first and the last
  # at least, with the time left), as GPT-2 small's shape takes minutes on the CPU; its
  # --help says so and names a smaller shape.
  zt_check_test(apps.bench.gpt_progress 0 60 "zt-bench gpt: 1 layer, width 32, 2 heads, context 16, vocabulary 512 \\([0-9.]+M parameters\\), batch 2 on cpu, f32: 4 steps\nzt-bench gpt: step 1/4 \\(warm-up\\) [0-9.]+m?s, about [0-9hms]+ left\n.*zt-bench gpt: step 4/4 \\(work counts\\) [0-9.]+m?s\n.*\"bench\":\"gpt\""
    $<TARGET_FILE:zt-bench> gpt --layers 1 --width 32 --heads 2 --seq 16 --vocab 512 --batch 2
    --steps 2)
  zt_check_test(apps.bench.gpt_help_cpu_shape 0 30 "on a few CPU cores each of its steps takes a minute or so.*try --layers 4 --width 256 --heads 4 --seq 256 --vocab 4096"
    $<TARGET_FILE:zt-bench> gpt --help)
  # Under mpirun (the job size it announces) a one-process benchmark is refused with exit 2,
  # but its --help is answered: it measures nothing.
  zt_check_test(apps.bench.one_process_under_mpirun 2 30 "zt-bench gpt: measures one process"
    ${CMAKE_COMMAND} -E env OMPI_COMM_WORLD_SIZE=2 $<TARGET_FILE:zt-bench> gpt)
  zt_check_test(apps.bench.help_under_mpirun 0 30 "Usage: zt-bench gpt.*--layers"
    ${CMAKE_COMMAND} -E env OMPI_COMM_WORLD_SIZE=2 $<TARGET_FILE:zt-bench> gpt --help)
endif()

# vqgpt sample --num is bounded (one grid image): a mistake on the command line (exit 2).
if(TARGET vqgpt)
  zt_refusal_test(apps.vqgpt.sample_num_is_bounded 2
    "--num: must be a whole number from 1 to 1024, got 5000"
    $<TARGET_FILE:vqgpt> sample --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml --out
    grid.png --num 5000)
  # A fraction is refused as no count, not as a number out of range.
  zt_refusal_test(apps.vqgpt.sample_num_is_a_whole_number 2
    "--num: must be a whole number from 1 to 1024, got 1.5"
    $<TARGET_FILE:vqgpt> sample --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml --out
    grid.png --num 1.5)
  # A seed of -1 would wrap to 2^64 - 1 (and anything past it saturate to the same).
  zt_refusal_test(apps.vqgpt.sample_seed_is_a_whole_number 2
    "--seed: must be a whole number from 0 to 18446744073709551615"
    $<TARGET_FILE:vqgpt> sample --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml
    --out grid.png --seed -1)
  # A --tokenizer path that is not there is blamed on --tokenizer (not the config's
  # gpt.tokenizer_checkpoint), and the app's name starts the error once.
  set(_no_tok ${CMAKE_CURRENT_BINARY_DIR}/apps_vqgpt_no_tokenizer)
  zt_check_test(apps.vqgpt.train_names_a_missing_tokenizer_option 1 60
    "vqgpt: error: no tokenizer at '[^']*/no_such_tokenizer.safetensors' \\(--tokenizer\\); check the path"
    $<TARGET_FILE:vqgpt> train --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml --steps 1
    --tokenizer ${_no_tok}/no_such_tokenizer.safetensors --set output_dir=${_no_tok}/run)
endif()
if(TARGET vqtok)
  # --split names a split of the config's data; --input reads other data instead.
  zt_refusal_test(apps.vqtok.encode_split_is_not_with_input 2 "--input excludes --split"
    $<TARGET_FILE:vqtok> encode --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    --out ids.npy --input clips.npy --split train)
  zt_refusal_test(apps.vqtok.encode_limit_is_not_negative 2
    "--limit: must be a whole number >= 0, got -1"
    $<TARGET_FILE:vqtok> encode --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    --out ids.npy --limit -1)
  # A batch past train.batch's 2^27 (batch x ranks would pass 64 bits).
  zt_refusal_test(apps.vqtok.encode_batch_at_most_2_27 2
    "--batch: must be a whole number of items from 0 \\(train.batch\\) to 134217728"
    $<TARGET_FILE:vqtok> encode --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    --out ids.npy --batch 4611686018427387904)
  # A count past int64 would be taken saturated (2^63 - 1 steps), not refused.
  zt_refusal_test(apps.vqtok.train_steps_past_int64 2
    "--steps: must be a whole number >= 1 below 2\\^63, got 99999999999999999999"
    $<TARGET_FILE:vqtok> train --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    --steps 99999999999999999999)
  # A --set whose key path leaves a part unnamed, or whose key is blank.
  zt_refusal_test(apps.vqtok.set_with_an_unnamed_part 2 "every part of the path named"
    $<TARGET_FILE:vqtok> train --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    --set train.=3)
  zt_refusal_test(apps.vqtok.set_with_a_blank_key 2 "every part of the path named"
    $<TARGET_FILE:vqtok> train --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    --set " =3")
endif()

# vqtok's inference subcommands and vqgpt export run on the CPU; a config that trains on a
# GPU is told so (here before the missing weights or checkpoint end the run).
if(TARGET vqtok AND TARGET vqgpt)
  zt_check_test(apps.vqtok.inference_says_it_runs_on_the_cpu 1 60 "vqtok eval: runs on the CPU \\(train.device: cuda applies to vqtok train\\)"
    $<TARGET_FILE:vqtok> eval --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml --set
    train.device=cuda --weights ${CMAKE_CURRENT_BINARY_DIR}/no_such_weights)
  # The timeline may not take a file the run writes itself, existing yet or not (a fresh
  # run's trace replaced its metrics.jsonl, and a lock file would free the run's folder).
  foreach(own metrics.jsonl .lock tb/events checkpoints/t.json)
    string(MAKE_C_IDENTIFIER "${own}" id)
    zt_refusal_test(apps.vqtok.trace_over_the_runs_own_${id} 1 "is a file this run writes itself"
      $<TARGET_FILE:vqtok> train --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
      --set output_dir=${CMAKE_CURRENT_BINARY_DIR}/trace_own_run
      --set train.trace=${CMAKE_CURRENT_BINARY_DIR}/trace_own_run/${own})
  endforeach()
  # Every command prints the config's warnings, not only those that build an engine (eval
  # with exported weights builds none).
  zt_check_test(apps.vqtok.eval_prints_the_configs_warnings 1 60 "warning: --set data=\\{eval_samples: 8\\} sets all of data: the keys"
    $<TARGET_FILE:vqtok> eval --config ${PROJECT_SOURCE_DIR}/configs/vqtok_tiny.yaml
    --set "data={eval_samples: 8}" --weights ${CMAKE_CURRENT_BINARY_DIR}/no_such_weights.safetensors)
  zt_check_test(apps.vqgpt.export_says_it_runs_on_the_cpu 1 60 "vqgpt export: runs on the CPU \\(train.device: cuda applies to vqgpt train\\)"
    $<TARGET_FILE:vqgpt> export --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml --set
    train.device=cuda --checkpoint ${CMAKE_CURRENT_BINARY_DIR}/no_such_checkpoint -o
    ${CMAKE_CURRENT_BINARY_DIR}/no_such_export.safetensors)
endif()

# zt-bench vqtok-step --zero at batch 1: the one-rank ZeRO-3 step runs end to end and reads
# nothing back to the host in a steady step (host_reads_per_step 0, which would be a GPU
# wait each); on the CPU it makes no GPU library calls (api_calls_per_step 0).
if(TARGET zt-bench)
  zt_check_test(apps.bench.vqtok_step_zero 0 60 "\"update\":\"zero3\".*\"host_reads_per_step\":0,\"api_calls_per_step\":0}"
    $<TARGET_FILE:zt-bench> vqtok-step --zero --batch 1 --steps 1)
endif()

# zt-bench zero on a small stack: every mode runs on 2 thread ranks and prints its step and
# inference times (the prefetching mode last).
if(TARGET zt-bench)
  zt_check_test(apps.bench.zero_modes 0 60 "\"mode\":\"single\".*\"infer_ms\":[0-9.]+}.*\"mode\":\"ddp\".*\"mode\":\"zero3\".*\"mode\":\"zero3_pf\",\"backend\":\"thread\",\"ranks\":2,\"step_ms\":[0-9.]+,\"vs_ddp\":[0-9.]+,\"infer_ms\":[0-9.]+,"
    $<TARGET_FILE:zt-bench> zero --width 16 --depth 2 --batch 4 --steps 3)
endif()

# zt-bench vqtok-step --paired: plain AdamW and the one-rank engine alternate in one process
# and the ratio of their medians is printed; it times eager steps only (exit 1 otherwise).
if(TARGET zt-bench)
  zt_check_test(apps.bench.vqtok_step_paired 0 60 "\"update\":\"adamw\".*\"update\":\"zero3\".*\"adamw_ms\":[0-9.]+,\"zero3_ms\":[0-9.]+,\"zero3_over_adamw\":[0-9.]+}"
    $<TARGET_FILE:zt-bench> vqtok-step --paired --batch 1 --steps 1)
  # --api: after the timed steps, each trainer's library call sites and their total line
  # (on the CPU: no sites, no calls, and the wall time of a step).
  zt_check_test(apps.bench.vqtok_step_paired_api 0 60 "\"update\":\"adamw\",\"api\":\"all\",\"sites\":0,\"calls_per_step\":0.0,\"host_ms_per_step\":0.000,\"wall_ms_per_step\":[0-9.]+}.*\"update\":\"zero3\",\"api\":\"all\""
    $<TARGET_FILE:zt-bench> vqtok-step --paired --api --batch 1 --steps 1)
  zt_refusal_test(apps.bench.vqtok_step_paired_times_eager_steps 1 "--paired times eager steps"
    $<TARGET_FILE:zt-bench> vqtok-step --paired --kernels)
endif()

# zt-bench vqtok-step and gpt --cuda-graph without --device cuda say what they need (exit 1).
if(TARGET zt-bench)
  zt_refusal_test(apps.bench.vqtok_step_cuda_graph_needs_cuda 1 "--cuda-graph needs --device cuda"
    $<TARGET_FILE:zt-bench> vqtok-step --cuda-graph)
  zt_refusal_test(apps.bench.gpt_cuda_graph_needs_cuda 1 "--cuda-graph needs --device cuda"
    $<TARGET_FILE:zt-bench> gpt --cuda-graph)
endif()

# Counts that make no sense are mistakes on the command line (exit 2), as for every other
# option, not garbage numbers, an endless loop (comm's sizes from 0) or an empty output.
if(TARGET zt-bench)
  foreach(bench plan comm vqgpt)
    zt_refusal_test(apps.bench.${bench}_ranks_must_be_positive 2
      "--ranks.*must be a whole number >= 1" $<TARGET_FILE:zt-bench> ${bench} --ranks -1)
  endforeach()
  set(bad_counts "comm|--min-bytes|0" "comm|--reps|0" "ops|--reps|0" "vqtok-step|--steps|0"
                 "vqtok-step|--threads|-1")
  foreach(case IN LISTS bad_counts)
    string(REPLACE "|" ";" args "${case}")
    list(GET args 0 bench)
    list(GET args 1 option)
    string(REPLACE "--" "" name "${bench}_${option}")
    zt_refusal_test(apps.bench.${name}_must_be_positive 2 "${option}.*must be a whole number >= [01]"
      $<TARGET_FILE:zt-bench> ${args})
  endforeach()
  # Checked before any case runs (it printed a case's line, then failed in the model).
  zt_refusal_test(apps.bench.plan_gpt_embd_multiple_of_4 2 "--gpt-embd: must be a multiple of 4"
    $<TARGET_FILE:zt-bench> plan --gpt-embd 6)
endif()

# Options that each parse but do not go together (exit 1, as the apps'): checked before
# anything runs or prints.
if(TARGET zt-bench)
  zt_refusal_test(apps.bench.comm_min_above_max 1 "--min-bytes 1000 is above --max-bytes 10"
    $<TARGET_FILE:zt-bench> comm --min-bytes 1000 --max-bytes 10)
  zt_refusal_test(apps.bench.ops_filter_matching_nothing 1 "no case matches --filter 'nomatch'"
    $<TARGET_FILE:zt-bench> ops --filter nomatch)
  # A case that fails prints its error in its line, the other cases still run, and the run
  # exits 1 (a GPU check counted it as passed): here a memory limit that holds every case's
  # inputs (about 28 MiB) but not the largest convolution's outputs and gradients.
  zt_check_test(apps.bench.ops_failed_case_exits_1 1 60 "\"op\":\"conv2d\",\"shape\":\"32x32x32x32[^\n]*\"error\":\"[^\n]*out of memory.*\"op\":\"softmax\".*zt-bench ops: [1-9][0-9]* of [0-9]+ cases failed"
    $<TARGET_FILE:zt-bench> ops --threads 1 --reps 1)
  set_tests_properties(apps.bench.ops_failed_case_exits_1 PROPERTIES ENVIRONMENT ZT_MEMORY_LIMIT=30MiB)
  # A tile shape the head dim's kernels are not built with, or a head dim without fused
  # kernels, is refused before the model is built (in f32 or on the GEMM path it was printed
  # as in use and ignored; in bf16 on a GPU it failed at the first step).
  zt_refusal_test(apps.bench.gpt_flash_tiles_not_built 1 "--flash-tiles: 7x7 is not built for head dim 32 \\(built: 16x32, 16x64"
    $<TARGET_FILE:zt-bench> gpt --layers 1 --width 64 --heads 2 --seq 16 --vocab 64 --flash-tiles 7x7)
  zt_refusal_test(apps.bench.gpt_flash_tiles_backward_not_built 1 "--flash-tiles: 32x64 is not built for head dim 32's backward \\(built: 16x32, 16x64, 32x32, 16x32x3\\)"
    $<TARGET_FILE:zt-bench> gpt --layers 1 --width 64 --heads 2 --seq 16 --vocab 64 --flash-tiles 16x32,32x64)
  zt_refusal_test(apps.bench.gpt_flash_tiles_no_fused_kernels 1 "--flash-tiles: head dim 16 has no fused attention kernels"
    $<TARGET_FILE:zt-bench> gpt --layers 1 --width 64 --heads 4 --seq 16 --vocab 64 --flash-tiles 16x32)
  # vqgpt takes its device from train.device, --device being a shortcut for --set
  # train.device=D as in the apps (a --set train.device=cuda ran on the CPU); one rank on
  # a GPU, refused before the GPU is looked for, so on any machine.
  zt_refusal_test(apps.bench.vqgpt_set_train_device 1 "zt-bench vqgpt: train.device cuda runs one rank"
    $<TARGET_FILE:zt-bench> vqgpt --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml
    --set train.device=cuda --ranks 1 2)
  # It times eager steps: train.cuda_graph is refused, not ignored.
  zt_refusal_test(apps.bench.vqgpt_cuda_graph_refused 1 "zt-bench vqgpt: times eager steps: train.cuda_graph is not supported"
    $<TARGET_FILE:zt-bench> vqgpt --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml
    --device cuda --set train.cuda_graph=true)
  # Each line says the dtype its GPT computes in: train.dtype's for zero3, f32 for
  # replicated_dp, whose replicas train without fp32 masters (a 16-bit one is refused), as a
  # note says; the two lines read alike, as if both ran in bf16.
  zt_check_test(apps.bench.vqgpt_dtype_per_mode 0 300 "\"mode\":\"zero3\"[^\n]*\"dtype\":\"bf16\".*replicated_dp trains the GPT in f32.*\"mode\":\"replicated_dp\"[^\n]*\"dtype\":\"f32\""
    $<TARGET_FILE:zt-bench> vqgpt --config ${PROJECT_SOURCE_DIR}/configs/vqgpt_tiny.yaml
    --ranks 1 --warmup 0 --steps 1 --set train.dtype=bf16 --set train.batch=1)
  zt_refusal_test(apps.bench.gpt_peak_must_be_positive 1 "--peak-tflops must be a finite number above 0, got -5"
    $<TARGET_FILE:zt-bench> gpt --peak-tflops -5)
  zt_refusal_test(apps.bench.zero_batch_must_split_over_ranks 1 "--batch 5 does not split evenly over --ranks 2"
    $<TARGET_FILE:zt-bench> zero --batch 5 --ranks 2)
endif()

# zt-bench vqtok-step --zero --offload runs end to end (on the CPU offload moves nothing,
# so the step is the --zero step) and says so in its line.
if(TARGET zt-bench)
  zt_check_test(apps.bench.vqtok_step_offload 0 60 "\"update\":\"zero3\",\"offload\":true.*\"host_reads_per_step\":0,\"api_calls_per_step\":0}"
    $<TARGET_FILE:zt-bench> vqtok-step --zero --offload --batch 1 --steps 1)
endif()
