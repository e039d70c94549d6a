// SHA-256 of a Blob, hex. crypto.subtle does it where the page is a secure
// context (https, localhost); on plain http over a LAN it is missing, so an
// incremental implementation reads the file in slices instead.

export async function sha256Hex(blob) {
  if (globalThis.crypto && crypto.subtle && blob.size <= 256 * 1024 * 1024) {
    const d = await crypto.subtle.digest('SHA-256', await blob.arrayBuffer());
    return hex(new Uint8Array(d));
  }
  const s = new Sha256();
  for (let o = 0; o < blob.size; o += 1 << 20) s.update(new Uint8Array(await blob.slice(o, o + (1 << 20)).arrayBuffer()));
  return hex(s.digest());
}

function hex(b) {
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

export class Sha256 {
  constructor() {
    this.h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    this.buf = new Uint8Array(64);
    this.n = 0; // bytes in buf
    this.len = 0; // total bytes
    this.w = new Uint32Array(64);
  }

  update(data) {
    this.len += data.length;
    let i = 0;
    if (this.n) {
      const take = Math.min(64 - this.n, data.length);
      this.buf.set(data.subarray(0, take), this.n);
      this.n += take;
      i = take;
      if (this.n === 64) { this.block(this.buf, 0); this.n = 0; }
    }
    for (; i + 64 <= data.length; i += 64) this.block(data, i);
    if (i < data.length) { this.buf.set(data.subarray(i), 0); this.n = data.length - i; }
  }

  digest() {
    const bits = this.len * 8;
    const pad = new Uint8Array(((this.n < 56 ? 56 : 120) - this.n) + 8);
    pad[0] = 0x80;
    const dv = new DataView(pad.buffer);
    dv.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
    dv.setUint32(pad.length - 4, bits >>> 0);
    this.update(pad);
    const out = new Uint8Array(32);
    const o = new DataView(out.buffer);
    this.h.forEach((v, j) => o.setUint32(j * 4, v));
    return out;
  }

  block(d, off) {
    const w = this.w;
    for (let j = 0; j < 16; j++) w[j] = (d[off + j * 4] << 24) | (d[off + j * 4 + 1] << 16) | (d[off + j * 4 + 2] << 8) | d[off + j * 4 + 3];
    for (let j = 16; j < 64; j++) {
      const a = w[j - 15], b = w[j - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[j] = (w[j - 16] + s0 + w[j - 7] + s1) | 0;
    }
    let [a, b, c, e0, e, f, g, hh] = this.h;
    for (let j = 0; j < 64; j++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (hh + S1 + ((e & f) ^ (~e & g)) + K[j] + w[j]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      hh = g; g = f; f = e; e = (e0 + t1) | 0; e0 = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    const H = this.h;
    H[0] += a; H[1] += b; H[2] += c; H[3] += e0; H[4] += e; H[5] += f; H[6] += g; H[7] += hh;
  }
}
