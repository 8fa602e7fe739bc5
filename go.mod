module github.com/vramscope/vramscope

go 1.26

require (
	github.com/klauspost/compress v1.20.3
	github.com/nlpodyssey/gopickle v0.2.0
	github.com/spf13/cobra v1.10.2
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
