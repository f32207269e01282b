package replay

import (
	"errors"
	"runtime"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/db"
)

// Snapshot reads the recorded memory as the latest Run left it (the output
// of its last launch): every allocation, the globals of the kernel that ran,
// and the arguments. Globals the kernel's module does not hold keep their
// recorded epilogue value.
func (s *Session) Snapshot() (*db.Snapshot, error) {
	if s.ctx == nil {
		return nil, errors.New("compile-only session: no device memory to read")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("replay: Snapshot after Close")
	}
	if s.broken != nil {
		return nil, ErrBroken
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.ctx.SetCurrent(); err != nil {
		return nil, err
	}
	if err := s.stream.Synchronize(); err != nil {
		return nil, err
	}
	out := &db.Snapshot{Args: s.rec.Args}
	for _, b := range s.lay.blobs {
		data := make([]byte, b.Size)
		if b.Size > 0 {
			if err := cuda.MemcpyDtoH(data, b.Addr); err != nil {
				return nil, err
			}
		}
		out.Blobs = append(out.Blobs, db.Blob{Addr: b.Addr, Size: b.Size, Data: data})
	}
	for i, g := range s.lay.globals {
		rg := s.rec.Epilogue.Globals[i]
		out.Globals = append(out.Globals, db.Global{Name: g.Name, Addr: rg.Addr, Size: g.Size, Data: append([]byte(nil), rg.Data...)})
	}
	if s.last != nil {
		for _, bg := range s.last.globals {
			if bg.slot.Size == 0 {
				continue
			}
			if err := cuda.MemcpyDtoH(out.Globals[bg.index].Data, bg.addr); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
