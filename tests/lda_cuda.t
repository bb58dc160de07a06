# runs the 'lda_cuda' group of tests/starfa_test
