#include "../../lwo.h"
#include "../../lwo.h" /* twice: the include guard holds */
int lwo_link_b(void) { return (int)lwo_create(NULL, NULL); }
