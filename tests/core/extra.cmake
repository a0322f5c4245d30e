# The whole core suite again on the narrower vector ISAs (ZT_CPU_ISA caps cpu::cpu_isa(), so
# a machine with AVX-512 runs the AVX2 and SSE2 variants of every CPU kernel too), each on
# two threads whatever OMP_NUM_THREADS says, so that the kernels' splits of a row, a block
# or a tensor over threads run even where the per-test entries run on one.
foreach(isa avx2 sse2)
  add_test(NAME core.isa_${isa} COMMAND ${exe} --gtest_brief=1)
  set_tests_properties(core.isa_${isa} PROPERTIES LABELS core PROCESSORS 2 TIMEOUT 300
                       ENVIRONMENT "ZT_CPU_ISA=${isa};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
endforeach()
