package fakespeech

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// OggOpus makes a real Ogg Opus file (RFC 7845): an OpusHead page, an
// OpusTags page, then ms of mono audio as 20 ms silent CELT frames (the
// three-byte packet encoders emit for digital silence), up to 255 a page,
// each page's granule position the 48 kHz samples decoded by its end plus
// the pre-skip, the last page marked end of stream, every page with its
// CRC. It is what OpenAI answers for response_format opus, in shape.
func OggOpus(ms int) []byte {
	const preSkip = 312
	var out bytes.Buffer
	seq := uint32(0)
	page := func(flags byte, granule int64, packets ...[]byte) {
		var segs []byte
		var data []byte
		for _, p := range packets {
			n := len(p)
			for n >= 255 {
				segs = append(segs, 255)
				n -= 255
			}
			segs = append(segs, byte(n))
			data = append(data, p...)
		}
		h := make([]byte, 27, 27+len(segs)+len(data))
		copy(h, "OggS")
		h[5] = flags
		binary.LittleEndian.PutUint64(h[6:], uint64(granule))
		binary.LittleEndian.PutUint32(h[14:], 0x1215)
		binary.LittleEndian.PutUint32(h[18:], seq)
		h[26] = byte(len(segs))
		h = append(append(h, segs...), data...)
		binary.LittleEndian.PutUint32(h[22:], oggCRC(h))
		out.Write(h)
		seq++
	}
	head := []byte("OpusHead\x01\x01")
	head = binary.LittleEndian.AppendUint16(head, preSkip)
	head = binary.LittleEndian.AppendUint32(head, 24000)
	head = append(head, 0, 0, 0) // gain 0, mapping family 0
	page(0x02, 0, head)
	tags := []byte("OpusTags")
	tags = binary.LittleEndian.AppendUint32(tags, 10)
	tags = append(tags, "fakespeech"...)
	tags = binary.LittleEndian.AppendUint32(tags, 0)
	page(0, 0, tags)
	frames := max((ms+19)/20, 1)
	silence := []byte{0xf8, 0xff, 0xfe}
	for done := 0; done < frames; {
		n := min(frames-done, 255)
		ps := make([][]byte, n)
		for i := range ps {
			ps[i] = silence
		}
		done += n
		flags := byte(0)
		if done == frames {
			flags = 0x04
		}
		page(flags, int64(done*960+preSkip), ps...)
	}
	return out.Bytes()
}

// CheckOgg checks an Ogg stream's pages: capture pattern, version,
// lengths, sequence numbers and CRCs, the first beginning the stream and
// the last ending it. It returns the number of pages.
func CheckOgg(b []byte) (pages int, err error) {
	for p := 0; p < len(b); pages++ {
		if len(b)-p < 27 || string(b[p:p+4]) != "OggS" || b[p+4] != 0 {
			return pages, fmt.Errorf("page %d: no Ogg page header", pages)
		}
		segs := int(b[p+26])
		if len(b)-p < 27+segs {
			return pages, fmt.Errorf("page %d: cut in its segment table", pages)
		}
		n := 27 + segs
		for _, s := range b[p+27 : p+27+segs] {
			n += int(s)
		}
		if len(b)-p < n {
			return pages, fmt.Errorf("page %d: cut in its data", pages)
		}
		pg := bytes.Clone(b[p : p+n])
		want := binary.LittleEndian.Uint32(pg[22:])
		clear(pg[22:26])
		if oggCRC(pg) != want {
			return pages, fmt.Errorf("page %d: bad CRC", pages)
		}
		if binary.LittleEndian.Uint32(pg[18:]) != uint32(pages) {
			return pages, fmt.Errorf("page %d: sequence number %d", pages, binary.LittleEndian.Uint32(pg[18:]))
		}
		if (pages == 0) != (pg[5]&0x02 != 0) {
			return pages, fmt.Errorf("page %d: beginning-of-stream flag", pages)
		}
		p += n
		if (p == len(b)) != (pg[5]&0x04 != 0) {
			return pages, fmt.Errorf("page %d: end-of-stream flag", pages)
		}
	}
	if pages == 0 {
		return 0, errors.New("no pages")
	}
	return pages, nil
}

// oggCRC is Ogg's CRC-32: polynomial 0x04c11db7, not reflected, starting
// at 0, over the page with its CRC field zero.
func oggCRC(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04c11db7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
