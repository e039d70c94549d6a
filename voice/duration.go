package voice

import (
	"bytes"
	"encoding/binary"
	"io"
	"time"
)

// Duration estimates how long audio plays, from its container's headers:
// WAV (byte rate and data size), Ogg (the last page's granule position,
// Opus at 48 kHz less its pre-skip, or Vorbis at its own rate), FLAC
// (STREAMINFO's samples), MP3 (the first frame's bit rate, as if constant:
// what TTS servers send) and OpenAI's raw pcm (24 kHz, 16-bit mono). It
// is 0 when the format is another or the headers do not add up: the
// caller then knows nothing of the length. It reads the file's first and
// last 64 KiB only, and never trusts a size beyond the bytes there are.
func Duration(mimeType string, r io.ReaderAt, size int64) time.Duration {
	if size <= 0 {
		return 0
	}
	head := make([]byte, min(size, probeBytes))
	if n, _ := r.ReadAt(head, 0); int64(n) != int64(len(head)) {
		return 0
	}
	switch {
	case bytes.HasPrefix(head, []byte("RIFF")):
		return wavDuration(head, size)
	case bytes.HasPrefix(head, []byte("OggS")):
		tail := head
		if size > probeBytes {
			tail = make([]byte, probeBytes)
			if n, _ := r.ReadAt(tail, size-probeBytes); n != len(tail) {
				return 0
			}
		}
		return oggDuration(head, tail)
	case bytes.HasPrefix(head, []byte("fLaC")):
		return flacDuration(head)
	case mimeType == "audio/mpeg":
		return mp3Duration(head, size)
	case mimeType == "audio/L16":
		return seconds(float64(size/2) / 24000)
	}
	return 0
}

// probeBytes is how much of each end of a file Duration reads: an Ogg page
// is at most 65,307 bytes, so the last one starts in the last 64 KiB.
const probeBytes = 64 << 10

func seconds(s float64) time.Duration {
	if s <= 0 || s > 24*3600 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

func wavDuration(b []byte, size int64) time.Duration {
	if len(b) < 12 || string(b[8:12]) != "WAVE" {
		return 0
	}
	var byteRate uint32
	for p := int64(12); p+8 <= int64(len(b)); {
		id, n := string(b[p:p+4]), int64(binary.LittleEndian.Uint32(b[p+4:]))
		body := p + 8
		switch id {
		case "fmt ":
			if body+12 <= int64(len(b)) {
				byteRate = binary.LittleEndian.Uint32(b[body+8:])
			}
		case "data":
			// A streamed WAV says 0 or 0xFFFFFFFF: the data is the rest.
			if n == 0 || n > size-body {
				n = size - body
			}
			if byteRate == 0 {
				return 0
			}
			return seconds(float64(n) / float64(byteRate))
		}
		p = body + n + n&1 // chunks are padded to even sizes
	}
	return 0
}

// oggDuration reads the first packet (the codec's identification header)
// at the head and the granule position of the last page in the tail.
func oggDuration(head, tail []byte) time.Duration {
	if len(head) < 27 {
		return 0
	}
	segs := int(head[26])
	if len(head) < 27+segs {
		return 0
	}
	first := head[27+segs:]
	var rate float64
	var preSkip int64
	switch {
	case bytes.HasPrefix(first, []byte("OpusHead")) && len(first) >= 12:
		rate, preSkip = 48000, int64(binary.LittleEndian.Uint16(first[10:]))
	case bytes.HasPrefix(first, []byte("\x01vorbis")) && len(first) >= 16:
		rate = float64(binary.LittleEndian.Uint32(first[12:]))
	default:
		return 0
	}
	last := bytes.LastIndex(tail, []byte("OggS"))
	if last < 0 || last+14 > len(tail) || rate == 0 {
		return 0
	}
	granule := int64(binary.LittleEndian.Uint64(tail[last+6:]))
	return seconds(float64(granule-preSkip) / rate)
}

// flacDuration reads STREAMINFO, the metadata block every FLAC file
// starts with: a 20-bit sample rate and 36-bit count of samples.
func flacDuration(b []byte) time.Duration {
	if len(b) < 8+18 || b[4]&0x7f != 0 {
		return 0
	}
	si := b[8:]
	rate := uint32(si[10])<<12 | uint32(si[11])<<4 | uint32(si[12])>>4
	total := uint64(si[13]&0x0f)<<32 | uint64(binary.BigEndian.Uint32(si[14:]))
	if rate == 0 {
		return 0
	}
	return seconds(float64(total) / float64(rate))
}

// MPEG-1 and MPEG-2 Layer III bit rates (kbit/s) and sample rates (Hz).
var (
	mp3Rates1 = [16]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0}
	mp3Rates2 = [16]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0}
)

// mp3Duration takes the first frame's bit rate as the file's, past an
// ID3v2 tag.
func mp3Duration(b []byte, size int64) time.Duration {
	p := 0
	if len(b) >= 10 && string(b[:3]) == "ID3" {
		size := int(b[6]&0x7f)<<21 | int(b[7]&0x7f)<<14 | int(b[8]&0x7f)<<7 | int(b[9]&0x7f)
		p = 10 + size
	}
	for ; p+4 <= len(b) && p < 64<<10; p++ {
		if b[p] != 0xff || b[p+1]&0xe0 != 0xe0 {
			continue
		}
		version, layer := (b[p+1]>>3)&3, (b[p+1]>>1)&3
		if layer != 1 || version == 1 { // Layer III only; version 1 is reserved
			continue
		}
		rates := mp3Rates2
		if version == 3 {
			rates = mp3Rates1
		}
		kbps := rates[b[p+2]>>4]
		if kbps == 0 {
			continue
		}
		return seconds(float64(size-int64(p)) * 8 / float64(kbps*1000))
	}
	return 0
}
