package nvbin

import (
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFatbinOfAnNvccBuild(t *testing.T) {
	cs, err := ParseFatbin(readTestdata(t, "vecadd.nv_fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("%d containers, want 2", len(cs))
	}
	cubins, ptx := Select(cs, 90)
	if len(cubins) != 2 || len(ptx) != 1 {
		t.Fatalf("sm_90 selects %d cubins and %d PTX, want 2 and 1", len(cubins), len(ptx))
	}
	if !ptx[0].Compressed() || ptx[0].Major != 9 || ptx[0].Minor != 0 {
		t.Errorf("PTX entry %+v: want zstd-compressed PTX ISA 9.0", ptx[0])
	}
	text, err := ptx[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(text)) != ptx[0].Size || !strings.Contains(string(text), ".target sm_90") {
		t.Errorf("decompressed PTX: %d bytes (header %d), target line missing", len(text), ptx[0].Size)
	}
	// The program's own cubin is the one the driver loaded (the module image
	// CUPTI handed over), byte for byte.
	loaded := readTestdata(t, "vecadd.sm_90.cubin")
	found := false
	for _, c := range cubins {
		b, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		found = found || string(b) == string(loaded)
	}
	if !found {
		t.Error("the loaded cubin is not among the fat binary's sm_90 cubins")
	}
	if cubins, ptx := Select(cs, 80); len(cubins) != 0 || len(ptx) != 0 {
		t.Errorf("sm_80 selects %d cubins and %d PTX from an sm_90 build, want none", len(cubins), len(ptx))
	}
	if _, ptx := Select(cs, 100); len(ptx) != 1 {
		t.Errorf("sm_100 selects %d PTX, want the compute_90 PTX to JIT", len(ptx))
	}
}

func TestContainerSizeFromTheHeader(t *testing.T) {
	data := readTestdata(t, "vecadd.nv_fatbin")
	n, err := ContainerSize(data[:16])
	if err != nil || n != 1608 {
		t.Fatalf("ContainerSize = %d, %v; want 1608", n, err)
	}
	if _, err := ContainerSize([]byte("ELF\x00............")); !errors.Is(err, ErrNotFatbin) {
		t.Errorf("non-fatbin: %v, want ErrNotFatbin", err)
	}
	if _, err := ContainerSize(data[:10]); err == nil {
		t.Error("a 10-byte header was accepted")
	}
}

// Each corruption must give a FormatError naming the field it broke.
func TestHostileFatbins(t *testing.T) {
	good := readTestdata(t, "vecadd.nv_fatbin")
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	le := binary.LittleEndian
	second := 1608 // the second container
	ptxEntry := second + 16 + 64 + 5608
	cases := []struct {
		name, field string
		data        []byte
	}{
		{"truncated", "payload size", good[:len(good)-100]},
		{"huge container", "payload size", mut(func(b []byte) []byte { le.PutUint64(b[8:], 1<<62); return b })},
		{"entry header size", "entry header size", mut(func(b []byte) []byte { le.PutUint32(b[16+4:], 8); return b })},
		{"entry overruns", "entry payload size", mut(func(b []byte) []byte { le.PutUint64(b[16+8:], 1<<40); return b })},
		{"compressed larger than payload", "compressed size", mut(func(b []byte) []byte { le.PutUint32(b[ptxEntry+16:], 1<<30); return b })},
		{"uncompressed size lies", "uncompressed size", mut(func(b []byte) []byte { le.PutUint64(b[ptxEntry+56:], 99); return b })},
		{"uncompressed size huge", "uncompressed size", mut(func(b []byte) []byte { le.PutUint64(b[ptxEntry+56:], 1<<50); return b })},
		{"zstd garbage", "zstd payload", mut(func(b []byte) []byte { copy(b[ptxEntry+80+8:], "garbage!"); return b })},
		{"second magic", "magic", mut(func(b []byte) []byte { b[second] ^= 1; return b })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs, err := ParseFatbin(c.data)
			if err == nil {
				// Payload errors show when the entry is read.
				for _, ct := range cs {
					for _, e := range ct.Entries {
						if _, err = e.Data(); err != nil {
							break
						}
					}
				}
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("error %v, want a FormatError on %q", err, c.field)
			}
		})
	}
	if _, err := ParseFatbin([]byte("\x7fELF not a fatbin")); !errors.Is(err, ErrNotFatbin) {
		t.Errorf("an ELF file: %v, want ErrNotFatbin", err)
	}
}

func TestLZ4Blocks(t *testing.T) {
	lit := append([]byte{0x50}, "hello"...)
	if out, err := decodeLZ4(lit, 5, 0); err != nil || string(out) != "hello" {
		t.Errorf("literals only: %q, %v", out, err)
	}
	// "abc" then a 9-byte match 3 back (overlapping its own output).
	match := []byte{0x35, 'a', 'b', 'c', 3, 0}
	if out, err := decodeLZ4(match, 12, 0); err != nil || string(out) != "abcabcabcabc" {
		t.Errorf("overlapping match: %q, %v", out, err)
	}
	for name, in := range map[string][]byte{
		"offset before the start": {0x35, 'a', 'b', 'c', 9, 0},
		"offset zero":             {0x35, 'a', 'b', 'c', 0, 0},
		"literals past the input": {0xf0, 200, 'a'},
		"truncated offset":        {0x35, 'a', 'b', 'c', 3},
	} {
		if _, err := decodeLZ4(in, 12, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := decodeLZ4(match, 11, 0); err == nil {
		t.Error("a block longer than its stated size was accepted")
	}
	if _, err := decodeLZ4(match, 13, 0); err == nil {
		t.Error("a block shorter than its stated size was accepted")
	}
}

func TestCubinParameterLayouts(t *testing.T) {
	c, err := ParseCubin(readTestdata(t, "vecadd.sm_90.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != 90 {
		t.Errorf("arch %d, want 90", c.Arch)
	}
	// vadd(const float*, const float*, float*, int, float), scale(float*, int):
	// what cuFuncGetParamInfo reports for them.
	want := []Kernel{
		{Name: "_Z4vaddPKfS0_Pfif", ParamBytes: 32, Params: []Param{{0, 0, 8}, {1, 8, 8}, {2, 16, 8}, {3, 24, 4}, {4, 28, 4}}},
		{Name: "_Z5scalePfi", ParamBytes: 12, Params: []Param{{0, 0, 8}, {1, 8, 4}}},
	}
	if !reflect.DeepEqual(c.Kernels, want) {
		t.Errorf("kernels\n%+v\nwant\n%+v", c.Kernels, want)
	}
	if _, ok := c.Kernel("_Z5scalePfi"); !ok {
		t.Error("Kernel(scale) not found")
	}
	if _, ok := c.Kernel("scale"); ok {
		t.Error("Kernel found by the demangled name")
	}
}

func TestHostileCubins(t *testing.T) {
	good := readTestdata(t, "vecadd.sm_90.cubin")
	if _, err := ParseCubin(good[:40]); err == nil {
		t.Error("a 40-byte cubin was accepted")
	}
	notCUDA := append([]byte(nil), good...)
	binary.LittleEndian.PutUint16(notCUDA[18:], 62) // EM_X86_64
	if _, err := ParseCubin(notCUDA); err == nil || !strings.Contains(err.Error(), "EM_CUDA") {
		t.Errorf("an x86-64 ELF: %v", err)
	}
	// Section .nv.info._Z4vaddPKfS0_Pfif lies at 0x788 (0x88 bytes): make
	// its first record claim more bytes than the section has.
	over := append([]byte(nil), good...)
	binary.LittleEndian.PutUint16(over[0x788+2:], 0x7000)
	if _, err := ParseCubin(over); err == nil || !strings.Contains(err.Error(), "overruns") {
		t.Errorf("an overrunning attribute: %v", err)
	}
	// A parameter moved past the 32-byte parameter buffer.
	past := append([]byte(nil), good...)
	binary.LittleEndian.PutUint16(past[0x788+8+4+6:], 40)
	if _, err := ParseCubin(past); err == nil || !strings.Contains(err.Error(), "past the 32-byte") {
		t.Errorf("a parameter past the buffer: %v", err)
	}
}

func TestPTXEntries(t *testing.T) {
	ptx := `
.version 9.0
.target sm_90
.visible .entry _Z4vaddPKfS0_Pfif(
.param .u64 .ptr .global .align 8 _Z4vaddPKfS0_Pfif_param_0,
.param .u32 _Z4vaddPKfS0_Pfif_param_3,
.param .align 4 .b8 _Z4vaddPKfS0_Pfif_param_4[12]
)
{ ret; }
.visible .entry noargs()
{ ret; }
// a comment naming .entryless things
`
	es, err := PTXEntries([]byte(ptx))
	if err != nil {
		t.Fatal(err)
	}
	want := []PTXEntry{
		{Name: "_Z4vaddPKfS0_Pfif", Params: []PTXParam{
			{Name: "_Z4vaddPKfS0_Pfif_param_0", Type: "u64", Ptr: true, Count: 1, Size: 8},
			{Name: "_Z4vaddPKfS0_Pfif_param_3", Type: "u32", Count: 1, Size: 4},
			{Name: "_Z4vaddPKfS0_Pfif_param_4", Type: "b8", Count: 12, Size: 12},
		}},
		{Name: "noargs"},
	}
	if !reflect.DeepEqual(es, want) {
		t.Errorf("entries\n%+v\nwant\n%+v", es, want)
	}
	for name, bad := range map[string]string{
		"unclosed list": ".entry k(.param .u32 a",
		"no type":       ".entry k(.param a)",
		"bad array":     ".entry k(.param .b8 a[x])",
		"bad name":      ".entry 9k(.param .u32 a)",
		"unknown":       ".entry k(.param .u32 .weird a)",
	} {
		if _, err := PTXEntries([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPTXOfTheNvccBuildMatchesItsCubin(t *testing.T) {
	cs, err := ParseFatbin(readTestdata(t, "vecadd.nv_fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	_, ptx := Select(cs, 90)
	text, err := ptx[0].Data()
	if err != nil {
		t.Fatal(err)
	}
	es, err := PTXEntries(text)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCubin(readTestdata(t, "vecadd.sm_90.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(c.Kernels) {
		t.Fatalf("%d PTX entries, %d cubin kernels", len(es), len(c.Kernels))
	}
	for _, e := range es {
		k, ok := c.Kernel(e.Name)
		if !ok || len(k.Params) != len(e.Params) {
			t.Fatalf("PTX entry %s has no matching cubin kernel", e.Name)
		}
		for i, p := range e.Params {
			if p.Size != k.Params[i].Size {
				t.Errorf("%s parameter %d: PTX %d bytes, cubin %d", e.Name, i, p.Size, k.Params[i].Size)
			}
		}
	}
}

// A PTX entry smaller than zstd's smallest window (1 KiB) decodes: a decoder
// bounded by the entry's own size refused it ("the payload holds more"),
// so no small kernel could be reassembled.
func TestSmallZstdEntryDecodes(t *testing.T) {
	fb := readTestdata(t, "small-ptx.nv_fatbin")
	ptx, err := EmbeddedPTX(fb, "_Z6vecaddPKfS0_Pfi", 90)
	if err != nil {
		t.Fatal(err)
	}
	if len(ptx) != 992 || !strings.Contains(string(ptx), ".entry _Z6vecaddPKfS0_Pfi") {
		t.Errorf("%d bytes of PTX, want the 992 of the vecadd entry (993 with its terminator)", len(ptx))
	}
}
