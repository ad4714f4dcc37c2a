package synth

// The generator uses its own small PRNG so that a seed produces the same
// stream on every Go version and platform (math/rand makes no such promise
// for its helper methods).

// splitmix64 is a fast 64-bit mixing function (Steele, Lea, Flood 2014).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hash64 mixes any number of words into one, order-sensitively.
func hash64(words ...uint64) uint64 {
	h := uint64(0x6a09e667f3bcc909)
	for _, w := range words {
		h = splitmix64(h ^ w)
	}
	return h
}

// hashString is FNV-1a, then mixed.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return splitmix64(h)
}

// rng is xoshiro256** seeded through splitmix64.
type rng struct{ s [4]uint64 }

func newRNG(seed uint64) *rng {
	r := &rng{}
	x := seed
	for i := range r.s {
		x += 0x9e3779b97f4a7c15
		r.s[i] = splitmix64(x)
	}
	return r
}

func rotl(x uint64, k uint) uint64 { return (x << k) | (x >> (64 - k)) }

func (r *rng) Uint64() uint64 {
	s := &r.s
	result := rotl(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = rotl(s[3], 45)
	return result
}

// Intn returns a value in [0, n); n must be > 0. The modulo bias is
// negligible for the small n used here and keeps the sequence simple.
func (r *rng) Intn(n int) int { return int(r.Uint64() % uint64(n)) }

// Range returns a value in [lo, hi].
func (r *rng) Range(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + r.Intn(hi-lo+1)
}

// Float64 returns a value in [0, 1).
func (r *rng) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// Chance reports true with probability p.
func (r *rng) Chance(p float64) bool { return r.Float64() < p }

// Hex returns n lower-case hex digits.
func (r *rng) Hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	var w uint64
	for i := range b {
		if i%16 == 0 {
			w = r.Uint64()
		}
		b[i] = digits[w&15]
		w >>= 4
	}
	return string(b)
}

// Weighted picks an index with probability proportional to w[i].
func (r *rng) Weighted(w []float64) int {
	total := 0.0
	for _, x := range w {
		total += x
	}
	t := r.Float64() * total
	for i, x := range w {
		if t < x {
			return i
		}
		t -= x
	}
	return len(w) - 1
}

// permutation is a keyed pseudo-random bijection on [0, n), built from a
// four-round Feistel network over the smallest even power of two >= n with
// cycle walking. It lets the generator visit samples in a shuffled order
// without materialising the order.
type permutation struct {
	n    uint64
	half uint
	mask uint64
	keys [4]uint64
}

func newPermutation(n uint64, seed uint64) permutation {
	bits := uint(1)
	for uint64(1)<<bits < n {
		bits++
	}
	half := (bits + 1) / 2
	p := permutation{n: n, half: half, mask: 1<<half - 1}
	for i := range p.keys {
		p.keys[i] = hash64(seed, 0x7065726d, uint64(i))
	}
	return p
}

func (p *permutation) at(i uint64) uint64 {
	x := i
	for {
		l, r := x>>p.half, x&p.mask
		for _, k := range p.keys {
			l, r = r, l^(splitmix64(r^k)&p.mask)
		}
		x = l<<p.half | r
		if x < p.n {
			return x
		}
	}
}
