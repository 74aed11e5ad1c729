// Unit cube [0,1]^3: the six faces are named xmin..zmax and the volume "domain".
SetFactory("OpenCASCADE");
Box(1) = {0, 0, 0, 1, 1, 1};
// OpenCASCADE numbers the faces of a box x = 0, x = 1, y = 0, y = 1, z = 0, z = 1
Physical Surface("xmin", 1) = {1};
Physical Surface("xmax", 2) = {2};
Physical Surface("ymin", 3) = {3};
Physical Surface("ymax", 4) = {4};
Physical Surface("zmin", 5) = {5};
Physical Surface("zmax", 6) = {6};
Physical Volume("domain", 1) = {1};
Mesh.CharacteristicLengthMax = 0.25;
