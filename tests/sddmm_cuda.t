# runs the 'sddmm_cuda' group of tests/starfa_test
