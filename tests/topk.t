# runs the 'topk' group of tests/starfa_test
