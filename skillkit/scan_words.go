//go:build !skillkit_simd128

package skillkit

// blockScan: without the tag skillkit_simd128 (and a target with simd128),
// strings are scanned 8 bytes at a time in a word's arithmetic: compilers that
// do not vectorize plainBlock and stringBlock would run them byte by byte.
const blockScan = false
