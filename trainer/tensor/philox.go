package tensor

// Philox4x32 is the Philox-4x32-10 block function (Salmon et al., SC'11; the
// generator behind cuRAND's curand_Philox4x32_10): it maps a 128-bit counter
// and a 64-bit key to four random 32-bit words.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	const (
		m0 = 0xD2511F53
		m1 = 0xCD9E8D57
		w0 = 0x9E3779B9
		w1 = 0xBB67AE85
	)
	for i := 0; i < 10; i++ {
		p0 := uint64(m0) * uint64(ctr[0])
		p1 := uint64(m1) * uint64(ctr[2])
		ctr = [4]uint32{
			uint32(p1>>32) ^ ctr[1] ^ key[0],
			uint32(p1),
			uint32(p0>>32) ^ ctr[3] ^ key[1],
			uint32(p0),
		}
		key[0] += w0
		key[1] += w1
	}
	return ctr
}

// PhiloxUniform is the uniform [0,1) number of element i of a stream keyed
// by seed with base counter counter: block (counter + i/4) of Philox4x32
// gives four words; element i takes word i mod 4, top 24 bits, times 2⁻²⁴.
// A kernel computes the same from its element index alone.
func PhiloxUniform(seed, counter uint64, i int) float32 {
	c := counter + uint64(i)/4
	w := Philox4x32([4]uint32{uint32(c), uint32(c >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return float32(w[i&3]>>8) * (1.0 / (1 << 24))
}
