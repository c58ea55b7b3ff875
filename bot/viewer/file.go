package viewer

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/agentos/agentos/runtime/event"
)

// readEvents reads an events.jsonl file.
func readEvents(path string) ([]event.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadEvents(f)
}

// ReadEvents parses an events.jsonl stream (one event per line).
func ReadEvents(r io.Reader) ([]event.Event, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var out []event.Event
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
				b = b[:len(b)-1]
			}
			if len(b) > 0 {
				e, perr := event.ParseLine(b)
				if perr != nil {
					return out, fmt.Errorf("line %d: %w", line, perr)
				}
				out = append(out, e)
			}
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}
