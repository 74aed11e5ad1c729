// A quarter of a thick cylindrical shell (radii 1 and 2, height 0.5) meshed with hexahedra:
// transfinite and recombined, so every cell is a hex; loaded with order = 2 its cells follow
// the arcs (curved second-order geometry). Boundary names: inner, outer, bottom, top, xzero,
// yzero. 4 x 4 x 2 cells (the counts are fixed: transfinite lines ignore mesh sizes).
SetFactory("Built-in");
n = 5;
Point(1) = {0, 0, 0};
Point(2) = {1, 0, 0};
Point(3) = {2, 0, 0};
Point(4) = {0, 2, 0};
Point(5) = {0, 1, 0};
Line(1) = {2, 3};
Circle(2) = {3, 1, 4};
Line(3) = {4, 5};
Circle(4) = {5, 1, 2};
Curve Loop(1) = {1, 2, 3, 4};
Plane Surface(1) = {1};
Transfinite Curve {1, 2, 3, 4} = n;
Transfinite Surface {1};
Recombine Surface {1};
out[] = Extrude {0, 0, 0.5} { Surface{1}; Layers{2}; Recombine; };
Physical Volume("shell") = {out[1]};
Physical Surface("bottom") = {1};
Physical Surface("top") = {out[0]};
Physical Surface("yzero") = {out[2]};
Physical Surface("outer") = {out[3]};
Physical Surface("xzero") = {out[4]};
Physical Surface("inner") = {out[5]};
