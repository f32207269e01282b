package nvbin

import "testing"

func FuzzParseFatbin(f *testing.F) {
	good := readTestdata(f, "vecadd.nv_fatbin")
	f.Add(good)
	f.Add(good[:1608])
	f.Add(good[:700])
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseFatbin(data)
		if err != nil {
			return
		}
		end := 0
		for _, c := range cs {
			if c.Offset < end || c.Offset+c.Size > len(data) {
				t.Fatalf("container at %d (%d bytes) outside the input or overlapping", c.Offset, c.Size)
			}
			end = c.Offset + c.Size
			for _, e := range c.Entries {
				b, err := e.Data()
				if err == nil && uint64(len(b)) != e.Size {
					t.Fatalf("entry at %d: %d bytes, header says %d", e.Offset, len(b), e.Size)
				}
			}
		}
	})
}

func FuzzParseCubin(f *testing.F) {
	f.Add(readTestdata(f, "vecadd.sm_90.cubin"))
	f.Add(variablesCubin())
	f.Add(readTestdata(f, "devglobal.sm_90.cubin"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCubin(data)
		if err != nil {
			return
		}
		for _, v := range c.Variables {
			if v.Name == "" || v.Size == 0 {
				t.Fatalf("variable %+v", v)
			}
		}
		for _, k := range c.Kernels {
			for i, p := range k.Params {
				if p.Ordinal != i || p.Size < 0 || p.Offset < 0 {
					t.Fatalf("%s parameter %d: %+v", k.Name, i, p)
				}
			}
		}
	})
}

func FuzzPTXEntries(f *testing.F) {
	f.Add([]byte(".visible .entry k(\n.param .u64 .ptr .align 8 k_param_0,\n.param .align 4 .b8 k_param_1[12]\n)\n{ ret; }"))
	f.Add([]byte(".entry k {"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := PTXEntries(data)
		if err != nil {
			return
		}
		for _, e := range es {
			for _, p := range e.Params {
				if p.Size != typeWidth(p.Type)*p.Count || p.Count < 1 {
					t.Fatalf("%s: parameter %+v", e.Name, p)
				}
			}
		}
	})
}

func FuzzEmbeddedPTX(f *testing.F) {
	good := readTestdata(f, "vecadd.nv_fatbin")
	f.Add(good, 90)
	f.Add(good[:700], 90)
	f.Add(readTestdata(f, "small-ptx.nv_fatbin"), 90)
	f.Add([]byte("//\n.version 9.0\n.target sm_90\n.visible .entry k()\n{ ret; }\n"), 80)
	f.Fuzz(func(t *testing.T, data []byte, arch int) {
		ptx, err := EmbeddedPTX(data, "k", arch)
		if err == nil && (len(ptx) == 0 || ptx[len(ptx)-1] == 0) {
			t.Fatalf("PTX of %d bytes ending in a NUL, or empty", len(ptx))
		}
	})
}
