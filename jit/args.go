package jit

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mneme-gpu/mneme/llvm"
)

// EncodeArg turns a value written on a command line into the little-endian
// bytes a kernel argument of parameter type p holds: integers (decimal or
// 0x hex), floats and doubles, and pointers (hex or decimal addresses).
func EncodeArg(p llvm.Param, text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	switch p.Kind {
	case llvm.ParamInt:
		n, err := strconv.ParseInt(text, 0, 64)
		signed := err == nil
		if err != nil {
			u, uerr := strconv.ParseUint(text, 0, 64)
			if uerr != nil {
				return nil, fmt.Errorf("%q is not an integer", text)
			}
			n = int64(u)
		}
		if p.Bits < 64 {
			// Only values of 2^63 and more reach here through ParseUint (n
			// wraps negative); none of them fits a narrower integer.
			lo, hi := -(int64(1) << (p.Bits - 1)), int64(1)<<p.Bits-1
			if !signed || n < lo || n > hi {
				return nil, fmt.Errorf("%q does not fit in i%d", text, p.Bits)
			}
		}
		b := binary.LittleEndian.AppendUint64(make([]byte, 0, max(8, p.Bytes())), uint64(n))
		// Integers wider than 64 bits (i128) are sign-extended from a
		// negative value, zero-extended otherwise.
		extension := byte(0)
		if signed && n < 0 {
			extension = 0xff
		}
		for len(b) < p.Bytes() {
			b = append(b, extension)
		}
		return b[:p.Bytes()], nil
	case llvm.ParamFloat:
		f, err := strconv.ParseFloat(text, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a float", text)
		}
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(f))), nil
	case llvm.ParamDouble:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a double", text)
		}
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)), nil
	case llvm.ParamPointer:
		u, err := strconv.ParseUint(text, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address", text)
		}
		return binary.LittleEndian.AppendUint64(nil, u), nil
	}
	return nil, fmt.Errorf("a %s argument cannot be given on the command line", p.Type)
}
