package voice

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/irisgate/irisgate/internal/fakespeech"
)

// TestDuration: the length of each format TTS servers answer in, from
// real files (WAV, Ogg Opus from the fake) and headers built by their
// specifications (Vorbis, FLAC, MP3); garbage and unknown formats are 0.
func TestDuration(t *testing.T) {
	streamed := fakespeech.WAV(24000, 12000)
	binary.LittleEndian.PutUint32(streamed[40:], 0xffffffff) // a streamed WAV's unknown data size

	vorbis := oggPage(0x02, 0, append([]byte("\x01vorbis\x00\x00\x00\x00\x01"), le32(22050)...))
	vorbis = append(vorbis, oggPage(0x04, 22050*3, []byte{0})...)

	flac := []byte("fLaC\x80\x00\x00\x22")
	si := make([]byte, 34)
	rate, total := uint32(44100), uint64(44100*5/2) // 2.5 s
	si[10], si[11], si[12] = byte(rate>>12), byte(rate>>4), byte(rate<<4)
	si[13] = byte(total >> 32 & 0x0f)
	binary.BigEndian.PutUint32(si[14:], uint32(total))
	flac = append(flac, si...)

	// MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, after an ID3v2 tag of 5 bytes.
	mp3 := append([]byte("ID3\x04\x00\x00\x00\x00\x00\x05"), 1, 2, 3, 4, 5)
	mp3 = append(mp3, 0xff, 0xfb, 0x90, 0x64)
	mp3 = append(mp3, make([]byte, 32000-4)...) // 2 s at 16,000 bytes a second

	for _, c := range []struct {
		name string
		mime string
		b    []byte
		want time.Duration
	}{
		{"wav", "audio/wav", fakespeech.WAV(24000, 36000), 1500 * time.Millisecond},
		{"wav streamed", "audio/wav", streamed, 500 * time.Millisecond},
		{"opus", "audio/ogg", fakespeech.OggOpus(6000), 6 * time.Second},
		{"opus, long", "audio/ogg", fakespeech.OggOpus(20 * 60 * 1000), 20 * time.Minute}, // its last page past the first 64 KiB
		{"vorbis", "audio/ogg", vorbis, 3 * time.Second},
		{"flac", "audio/flac", flac, 2500 * time.Millisecond},
		{"mp3", "audio/mpeg", mp3, 2 * time.Second},
		{"pcm", "audio/L16", make([]byte, 48000), time.Second},
		{"aac", "audio/aac", []byte{0xff, 0xf1, 0x50, 0x80}, 0},
		{"cut wav", "audio/wav", fakespeech.WAV(24000, 100)[:30], 0},
		{"not ogg", "audio/ogg", []byte("OggS but no page"), 0},
		{"empty", "audio/mpeg", nil, 0},
	} {
		if got := Duration(c.mime, bytes.NewReader(c.b), int64(len(c.b))); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The fake's Ogg Opus files are valid Ogg streams, and Speak hands them
// over as OpenAI's opus: audio/ogg, an .ogg file.
func TestSpeakOpus(t *testing.T) {
	fake := &fakespeech.TTS{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s, err := NewTTS(TTSConfig{URL: srv.URL + "/v1"}) // opus is the default
	if err != nil {
		t.Fatal(err)
	}
	audio, mt, ext, err := s.Speak(context.Background(), "Hello there, this is a longer sentence to speak.")
	if err != nil || mt != "audio/ogg" || ext != "ogg" {
		t.Fatalf("%s %s %v", mt, ext, err)
	}
	if pages, err := fakespeech.CheckOgg(audio); err != nil || pages < 3 {
		t.Fatalf("%d pages: %v", pages, err)
	}
	if d := Duration(mt, bytes.NewReader(audio), int64(len(audio))); d <= 0 {
		t.Fatalf("duration %v", d)
	}
	if pages, err := fakespeech.CheckOgg(fakespeech.OggOpus(20 * 255 * 3)); err != nil || pages != 2+3 {
		t.Fatalf("a long file: %d pages, %v", pages, err)
	}
}

func FuzzDuration(f *testing.F) {
	f.Add("audio/wav", fakespeech.WAV(8000, 10))
	f.Add("audio/ogg", fakespeech.OggOpus(100))
	f.Add("audio/mpeg", []byte{0xff, 0xfb, 0x90, 0x64, 0, 0})
	f.Add("audio/flac", []byte("fLaC\x00\x00\x00\x22"))
	f.Fuzz(func(t *testing.T, mime string, b []byte) {
		if d := Duration(mime, bytes.NewReader(b), int64(len(b))); d < 0 || d > 24*time.Hour {
			t.Fatalf("%v", d)
		}
	})
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// oggPage is one Ogg page holding one packet (CRC left zero: Duration
// reads no CRC).
func oggPage(flags byte, granule int64, packet []byte) []byte {
	h := make([]byte, 27)
	copy(h, "OggS")
	h[5] = flags
	binary.LittleEndian.PutUint64(h[6:], uint64(granule))
	h[26] = 1
	return append(append(h, byte(len(packet))), packet...)
}
