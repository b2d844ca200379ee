#include "dispatch_util.h"
int main(void){return 0;}
