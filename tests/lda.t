# runs the 'lda' group of tests/starfa_test
