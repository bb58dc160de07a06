# runs the 'topk_cuda' group of tests/starfa_test
