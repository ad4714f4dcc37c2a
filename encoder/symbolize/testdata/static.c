/* A C program whose hot functions are static (internal): a stripped copy
 * names them nowhere (no .symtab, not in .dynsym), so only its separate
 * debug file can. The debug file tests build it with a build id, split
 * off its debug file with objcopy --only-keep-debug, strip it and add a
 * .gnu_debuglink. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long tandem_static_leaf(long n) {
	long s = 0;
	for (long i = 0; i < n; i++)
		s += (i * 5) ^ (s >> 2);
	return s;
}

__attribute__((noinline)) static long tandem_static_middle(long n) {
	return tandem_static_leaf(n) + tandem_static_leaf(n / 2);
}

int main(int argc, char **argv) {
	long rounds = argc > 1 ? atol(argv[1]) : 1;
	long total = 0;
	for (long r = 0; r < rounds; r++)
		total += tandem_static_middle(1000000);
	printf("%ld\n", total);
	return 0;
}
