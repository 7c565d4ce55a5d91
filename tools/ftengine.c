/* ftengine.c - the command-line tool (placeholder until the model commands land). */
#include "ftengine.h"
#include <stdio.h>
int main(void) {
    ft_build_info b = ft_build_info_get();
    printf("ftengine %s\n", b.version);
    return 0;
}
