import java.nio.charset.StandardCharsets; import java.util.*;
public class JavaUtf8Vectors { public static void main(String[] a) { Random r = new Random(7); StringBuilder sb = new StringBuilder();
 for (int i = 0; i < 20000; i++) { int n = r.nextInt(7); byte[] b = new byte[n]; for (int j = 0; j < n; j++) { int k = r.nextInt(10); b[j] = (byte)(k < 3 ? 0x80 + r.nextInt(64) : k < 5 ? 0xE0 + r.nextInt(16) : k < 7 ? 0xF0 + r.nextInt(16) : k < 8 ? 0xC0 + r.nextInt(32) : r.nextInt(256)); }
 StringBuilder h = new StringBuilder(); for (byte x : b) h.append(String.format("%02x", x & 0xff));
 String s = new String(b, StandardCharsets.UTF_8); StringBuilder c = new StringBuilder(); for (char ch : s.toCharArray()) c.append(String.format("%04x", (int) ch));
 System.out.println(h + " " + c); } } }
