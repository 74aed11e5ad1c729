// Ball of radius 1 about the origin: the surface is "sphere", the volume "ball". Coarse on
// purpose (a few hundred tets) so that the curved (order = 2) geometry shows: the straight
// mesh misses the volume 4/3 pi by a few percent, the curved one by far less.
SetFactory("OpenCASCADE");
Sphere(1) = {0, 0, 0, 1};
Physical Surface("sphere", 1) = {1};
Physical Volume("ball", 1) = {1};
Mesh.CharacteristicLengthMax = 0.5;
