module github.com/buddy-run/buddy/runtime/testdata/skillkit/noop

go 1.24.0

require github.com/buddy-run/buddy/skillkit v0.0.0

require github.com/extism/go-pdk v1.1.3 // indirect

replace github.com/buddy-run/buddy/skillkit => ../../../../skillkit
