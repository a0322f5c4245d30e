# The nn suite again on the narrower vector ISAs, on two threads (see tests/core/extra.cmake).
foreach(isa avx2 sse2)
  add_test(NAME nn.isa_${isa} COMMAND ${exe} --gtest_brief=1)
  set_tests_properties(nn.isa_${isa} PROPERTIES LABELS nn PROCESSORS 2 TIMEOUT 120
                       ENVIRONMENT "ZT_CPU_ISA=${isa};OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
endforeach()
