/* A C workload for the symbolizer's tests: built with gcc -g0 (no DWARF),
 * dynamically linked, so its functions are named only by .symtab (or
 * .dynsym once stripped) and its calls into libc go through the PLT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) long tandem_leaf(long n) {
	long s = 0;
	for (long i = 0; i < n; i++)
		s += (i * 7) ^ (s >> 3);
	return s;
}

__attribute__((noinline)) long tandem_middle(long n) {
	char *buf = malloc(64);
	snprintf(buf, 64, "%ld", n);
	long v = tandem_leaf(n + (long)strlen(buf));
	free(buf);
	return v;
}

int main(int argc, char **argv) {
	long rounds = argc > 1 ? atol(argv[1]) : 1;
	long total = 0;
	for (long r = 0; rounds <= 0 || r < rounds; r++)
		total += tandem_middle(1000000);
	printf("%ld\n", total);
	return 0;
}
