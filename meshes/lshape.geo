// L-shaped domain [0,1]^2 minus [0.5,1]^2: the re-entrant corner is at (0.5, 0.5).
h = 0.1;
Point(1) = {0, 0, 0, h};
Point(2) = {1, 0, 0, h};
Point(3) = {1, 0.5, 0, h};
Point(4) = {0.5, 0.5, 0, h / 4};
Point(5) = {0.5, 1, 0, h};
Point(6) = {0, 1, 0, h};
For i In {1:6}
  Line(i) = {i, i % 6 + 1};
EndFor
Curve Loop(1) = {1, 2, 3, 4, 5, 6};
Plane Surface(1) = {1};
Physical Curve("outer", 1) = {1, 2, 5, 6};
Physical Curve("corner", 2) = {3, 4};
Physical Surface("domain", 1) = {1};
