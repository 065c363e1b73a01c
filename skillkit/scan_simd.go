//go:build skillkit_simd128

package skillkit

// blockScan: scan strings 32 bytes at a time first (plainBlock,
// stringBlock), which LLVM turns into SIMD instructions. Set by building
// with the tag skillkit_simd128 for a target with simd128, as the built-ins
// are (builtins-src/tinygo-target.json sets both).
const blockScan = true
