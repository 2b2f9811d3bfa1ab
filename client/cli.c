#include <stdio.h>
int main(void) { puts("sluice: not yet"); return 1; }
