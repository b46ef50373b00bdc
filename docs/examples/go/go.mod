module trizktest

go 1.19
