# runs the 'sddmm' group of tests/starfa_test
