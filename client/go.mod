module github.com/physiciansnet/capacityd/client

go 1.26.8
